/* spank_hpod.so: HyperPod's `--auto-resume=N` for srun, sbatch and salloc.
 *
 * A thin C shim: the SPANK symbols must have C linkage and external visibility
 * (SPANK_PLUGIN in a C++ file gives them internal linkage and Slurm cannot load
 * the plugin), and everything else is in the tested C++ library behind bridge.h.
 *
 * What runs where (slurm-on-namespaces.md §10):
 *   sbatch/salloc (S_CTX_ALLOCATOR): the option is validated; Slurm exports its
 *     value to the job's environment, so every srun in the job inherits it.
 *   srun (S_CTX_LOCAL): init_post_opt hands over to the supervisor, which runs the
 *     step as child sruns and _exits with the final exit code; a child srun (marked
 *     by HPOD_AUTO_RESUME_ATTEMPT) reports its step id in local_user_init.
 *   slurmstepd (S_CTX_REMOTE): task_init prints HyperPod's per-task line.
 * Every callback returns 0 except the option callback on a bad value. */

#include <slurm/spank.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "hpod/slurm/spank/bridge.h"

SPANK_PLUGIN(hpod, 1)

/* What the option callback saw in this process (srun: from the command line or
 * from the propagated environment variable; slurmstepd: from the launch). */
static int g_retries = 0;
static int g_option_seen = 0;

static int auto_resume_cb(int val, const char* optarg, int remote) {
  int retries = 0;
  (void)val;
  if (hpod_auto_resume_parse(optarg, remote, &retries) != 0) return -1;
  g_retries = retries;
  g_option_seen = 1;
  return 0;
}

static struct spank_option g_auto_resume = {
    (char*)"auto-resume", (char*)"N",
    (char*)"retry the step up to N times after hpod recovers a failed node (HyperPod's "
           "auto-resume)",
    1, 0, auto_resume_cb};

int slurm_spank_init(spank_t sp, int ac, char** av) {
  (void)ac;
  (void)av;
  /* Registered in every context: the only way that works for sbatch/salloc. A
   * failure (another plugin owns the name) must not stop the job. */
  (void)spank_option_register(sp, &g_auto_resume);
  return ESPANK_SUCCESS;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char** av) {
  int retries = 0;
  int rc;
  (void)sp;
  (void)ac;
  (void)av;
  if (spank_context() != S_CTX_LOCAL) return ESPANK_SUCCESS;
  if (!hpod_auto_resume_local_decision(g_retries, g_option_seen, &retries)) return ESPANK_SUCCESS;
  rc = hpod_auto_resume_supervise(retries);
  if (rc < 0) return ESPANK_SUCCESS; /* could not begin: run the step once, as plain srun */
  fflush(stdout);
  fflush(stderr);
  /* The supervisor ran every attempt as a child srun; this srun has no step of its
   * own to clean up, and must not go on to launch one. */
  _exit(rc);
}

int slurm_spank_local_user_init(spank_t sp, int ac, char** av) {
  uint32_t step_id = 0;
  (void)ac;
  (void)av;
  if (getenv("HPOD_AUTO_RESUME_STEP_FD") == NULL) return ESPANK_SUCCESS;
  if (spank_get_item(sp, S_JOB_STEPID, &step_id) == ESPANK_SUCCESS) {
    hpod_auto_resume_report_step(step_id);
  }
  return ESPANK_SUCCESS;
}

int slurm_spank_task_init(spank_t sp, int ac, char** av) {
  uint32_t job_id = 0;
  uint32_t step_id = 0;
  uint32_t task_id = 0;
  int retries = g_retries;
  char* arg = NULL;
  (void)ac;
  (void)av;
  if (spank_remote(sp) != 1) return ESPANK_SUCCESS;
  /* The callback normally ran in this slurmstepd before the task forked; getopt is
   * the documented way in task_init and covers the case where it did not. */
  if (!g_option_seen) {
    if (spank_option_getopt(sp, &g_auto_resume, &arg) != ESPANK_SUCCESS || arg == NULL) {
      return ESPANK_SUCCESS;
    }
    if (hpod_auto_resume_parse(arg, 1, &retries) != 0) return ESPANK_SUCCESS;
  }
  if (retries <= 0) return ESPANK_SUCCESS;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_TASK_GLOBAL_ID, &task_id) != ESPANK_SUCCESS) {
    return ESPANK_SUCCESS;
  }
  hpod_auto_resume_task_init(job_id, step_id, task_id);
  return ESPANK_SUCCESS;
}
