/* The C functions spank_hpod.c calls for pyxis's --container-* options (the C++ is
 * container_step.h). Each catches every exception; failures are return values
 * with the user's one line in `err` (NUL-terminated, truncated to errlen).
 *
 * Thread contract: Slurm's SPANK thread; the task functions run in a forked task. */
#ifndef HPOD_SLURM_SPANK_CONTAINER_BRIDGE_H_
#define HPOD_SLURM_SPANK_CONTAINER_BRIDGE_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The options, in registration order (the `val` of each struct spank_option). */
enum hpod_container_option_id {
  HPOD_CONTAINER_IMAGE,
  HPOD_CONTAINER_MOUNTS,
  HPOD_CONTAINER_WORKDIR,
  HPOD_CONTAINER_NAME,
  HPOD_CONTAINER_WRITABLE,
  HPOD_CONTAINER_READONLY,
  HPOD_CONTAINER_ENV,
  HPOD_CONTAINER_MOUNT_HOME,
  HPOD_CONTAINER_NO_MOUNT_HOME,
  HPOD_CONTAINER_REMAP_ROOT,
  HPOD_CONTAINER_NO_REMAP_ROOT,
  HPOD_CONTAINER_ENTRYPOINT,
  HPOD_CONTAINER_NO_ENTRYPOINT,
};

/* plugstack.conf arguments: container_cache=DIR, container_cache_max_gib=N. */
void hpod_container_configure(int ac, char** av);
/* One option as Slurm hands it over; -1 after printing the line (not when remote). */
int hpod_container_option(int option, const char* value, int remote);
/* slurmstepd, user_init: starts the step's container if one was asked for (not for
 * the batch/extern steps). 0, or -1 with the one line in err. */
int hpod_container_step_start(unsigned int job_id, unsigned int step_id, unsigned int uid,
                              unsigned int gid, int allow_http, char* err, size_t errlen);
/* In a task before privileges drop: join the container's mount namespace. 0, or
 * -1 with err. */
int hpod_container_task_enter(char* err, size_t errlen);
/* The image's environment for the task: count, then name/value i. */
int hpod_container_task_env_count(void);
const char* hpod_container_task_env_name(int i);
const char* hpod_container_task_env_value(int i);
/* In a task as its user, just before exec: --container-remap-root, then the
 * working directory (slurmstepd changes to srun's own after task_init_privileged).
 * 0, or -1 with err. */
int hpod_container_task_user(char* err, size_t errlen);
/* In a task as its user, the very last: --container-entrypoint execs the image's
 * entrypoint with the command (argc/argv) and env; returns -1 with err only if
 * that exec failed, 0 when there is nothing to do. */
int hpod_container_task_exec(int argc, char** argv, char** env, char* err, size_t errlen);
/* slurmstepd, exit: the helper tears the container down. */
void hpod_container_step_stop(void);
/* Job epilog (root): removes the job's named containers on this node. */
void hpod_container_job_end(unsigned int job_id);

#ifdef __cplusplus
}
#endif

#endif /* HPOD_SLURM_SPANK_CONTAINER_BRIDGE_H_ */
