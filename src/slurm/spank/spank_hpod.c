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
 * pyxis's --container-* options (container_bridge.h): validated where they are
 * parsed; in slurmstepd, user_init starts the step's container on the node,
 * task_init_privileged moves each task into it, exit tears it down, and the job
 * epilog removes the job's named containers.
 * Every callback returns 0 except the option callbacks on a bad value and the
 * container's callbacks when the step's container cannot be had (the step fails
 * with one line; the node is not drained). */

#include <slurm/spank.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "hpod/slurm/spank/bridge.h"
#include "hpod/slurm/spank/container_bridge.h"

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

/* slurmstepd: user_init could not start the step's container (its line printed). */
static int g_container_failed = 0;

static int container_cb(int val, const char* optarg, int remote) {
  return hpod_container_option(val, optarg, remote);
}

/* pyxis's names and meanings (https://github.com/NVIDIA/pyxis, srun --help). */
static struct spank_option g_container_options[] = {
    {(char*)"container-image", (char*)"[USER@][REGISTRY#]IMAGE[:TAG]|PATH",
     (char*)"the image to run the step's tasks in: a registry image (enroot URI) or a "
            "squashfs file on the node",
     1, HPOD_CONTAINER_IMAGE, container_cb},
    {(char*)"container-mounts", (char*)"SRC:DST[:FLAGS][,SRC:DST...]",
     (char*)"bind mount[s] inside the container; flags joined with '+', e.g. ro", 1,
     HPOD_CONTAINER_MOUNTS, container_cb},
    {(char*)"container-workdir", (char*)"PATH", (char*)"working directory inside the container", 1,
     HPOD_CONTAINER_WORKDIR, container_cb},
    {(char*)"container-name", (char*)"NAME",
     (char*)"keep the container's writable state under NAME for the job's later steps", 1,
     HPOD_CONTAINER_NAME, container_cb},
    {(char*)"container-writable", NULL, (char*)"make the container filesystem writable (default)",
     0, HPOD_CONTAINER_WRITABLE, container_cb},
    {(char*)"container-readonly", NULL, (char*)"make the container filesystem read-only", 0,
     HPOD_CONTAINER_READONLY, container_cb},
    {(char*)"container-env", (char*)"NAME[,NAME...]",
     (char*)"environment variables whose node value wins over the image's", 1,
     HPOD_CONTAINER_ENV, container_cb},
    {(char*)"container-mount-home", NULL, (char*)"bind mount the user's home directory", 0,
     HPOD_CONTAINER_MOUNT_HOME, container_cb},
    {(char*)"no-container-mount-home", NULL,
     (char*)"do not bind mount the user's home directory (default)", 0,
     HPOD_CONTAINER_NO_MOUNT_HOME, container_cb},
    {(char*)"container-remap-root", NULL, (char*)"be root inside the container (a user namespace)",
     0, HPOD_CONTAINER_REMAP_ROOT, container_cb},
    {(char*)"no-container-remap-root", NULL, (char*)"keep your own uid inside the container (default)",
     0, HPOD_CONTAINER_NO_REMAP_ROOT, container_cb},
    {(char*)"container-entrypoint", NULL, (char*)"run the image's entrypoint, with the command as its arguments",
     0, HPOD_CONTAINER_ENTRYPOINT, container_cb},
    {(char*)"no-container-entrypoint", NULL, (char*)"do not run the image's entrypoint (default)",
     0, HPOD_CONTAINER_NO_ENTRYPOINT, container_cb},
};

int slurm_spank_init(spank_t sp, int ac, char** av) {
  size_t i;
  hpod_container_configure(ac, av);
  /* Registered in every context: the only way that works for sbatch/salloc. A
   * failure (another plugin owns the name, e.g. pyxis) must not stop the job. */
  (void)spank_option_register(sp, &g_auto_resume);
  for (i = 0; i < sizeof(g_container_options) / sizeof(g_container_options[0]); ++i) {
    (void)spank_option_register(sp, &g_container_options[i]);
  }
  return ESPANK_SUCCESS;
}

int slurm_spank_user_init(spank_t sp, int ac, char** av) {
  uint32_t job_id = 0, step_id = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  char http[16] = "";
  char err[1024] = "";
  int allow_http;
  (void)ac;
  (void)av;
  if (spank_remote(sp) != 1) return ESPANK_SUCCESS;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS) {
    return ESPANK_SUCCESS;
  }
  /* enroot's switch for a registry without TLS, from the job's environment. */
  allow_http = spank_getenv(sp, "ENROOT_ALLOW_HTTP", http, sizeof(http)) == ESPANK_SUCCESS &&
               (http[0] == 'y' || http[0] == 'Y' || http[0] == '1' || http[0] == 't');
  if (hpod_container_step_start(job_id, step_id, uid, gid, allow_http, err, sizeof(err)) != 0) {
    /* Printed here (it reaches srun's stderr) and failed in every task: a failed
     * user_init ends the launch with srun's exit code 0 on 22.05, a failed task
     * with 1, as a script's `srun ... || handle` needs. */
    slurm_error("%s", err);
    g_container_failed = 1;
  }
  return ESPANK_SUCCESS;
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char** av) {
  char err[1024] = "";
  int i, n;
  (void)ac;
  (void)av;
  if (spank_remote(sp) != 1) return ESPANK_SUCCESS;
  if (g_container_failed) return -1;
  if (hpod_container_task_enter(err, sizeof(err)) != 0) {
    slurm_error("%s", err);
    return -1;
  }
  n = hpod_container_task_env_count();
  for (i = 0; i < n; ++i) {
    (void)spank_setenv(sp, hpod_container_task_env_name(i), hpod_container_task_env_value(i), 1);
  }
  return ESPANK_SUCCESS;
}

int slurm_spank_exit(spank_t sp, int ac, char** av) {
  (void)ac;
  (void)av;
  if (spank_remote(sp) == 1) hpod_container_step_stop();
  return ESPANK_SUCCESS;
}

int slurm_spank_job_epilog(spank_t sp, int ac, char** av) {
  uint32_t job_id = 0;
  (void)ac;
  (void)av;
  if (spank_get_item(sp, S_JOB_ID, &job_id) == ESPANK_SUCCESS) hpod_container_job_end(job_id);
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

/* HyperPod's per-task line, for the steps of a job with --auto-resume. */
static void auto_resume_task_line(spank_t sp) {
  uint32_t job_id = 0;
  uint32_t step_id = 0;
  uint32_t task_id = 0;
  int retries = g_retries;
  char* arg = NULL;
  /* The callback normally ran in this slurmstepd before the task forked; getopt is
   * the documented way in task_init and covers the case where it did not. */
  if (!g_option_seen) {
    if (spank_option_getopt(sp, &g_auto_resume, &arg) != ESPANK_SUCCESS || arg == NULL) return;
    if (hpod_auto_resume_parse(arg, 1, &retries) != 0) return;
  }
  if (retries <= 0) return;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_TASK_GLOBAL_ID, &task_id) != ESPANK_SUCCESS) {
    return;
  }
  hpod_auto_resume_task_init(job_id, step_id, task_id);
}

int slurm_spank_task_init(spank_t sp, int ac, char** av) {
  char err[1024] = "";
  int argc = 0;
  char** argv = NULL;
  char** env = NULL;
  (void)ac;
  (void)av;
  if (spank_remote(sp) != 1) return ESPANK_SUCCESS;
  /* After slurmstepd's own chdir to srun's directory: the container's workdir. */
  if (hpod_container_task_user(err, sizeof(err)) != 0) {
    slurm_error("%s", err);
    return -1;
  }
  auto_resume_task_line(sp);
  /* Last: --container-entrypoint execs the image's entrypoint with the command
   * (slurmstepd's own exec would run the command alone); it returns only on failure. */
  if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) == ESPANK_SUCCESS &&
      spank_get_item(sp, S_JOB_ENV, &env) == ESPANK_SUCCESS &&
      hpod_container_task_exec(argc, argv, env, err, sizeof(err)) != 0) {
    slurm_error("%s", err);
    return -1;
  }
  return ESPANK_SUCCESS;
}
