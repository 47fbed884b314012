/* The C functions the SPANK shim (spank_hpod.c) calls into the C++ supervisor
 * library. Each one catches every exception and reports failure as a return
 * value: nothing may unwind into srun or slurmstepd, which are C programs.
 *
 * Thread contract: called from the single thread on which Slurm runs SPANK
 * callbacks. */
#ifndef HPOD_SLURM_SPANK_BRIDGE_H_
#define HPOD_SLURM_SPANK_BRIDGE_H_

#ifdef __cplusplus
extern "C" {
#endif

/* Parses a --auto-resume value. 0 and *retries set, or -1 after printing the one
 * error line to stderr (not in slurmstepd, remote != 0: srun already checked it). */
int hpod_auto_resume_parse(const char* value, int remote, int* retries);

/* srun, init_post_opt: whether this srun becomes the supervisor. `retries` and
 * `option_seen` are what the option callback recorded. Prints the line for a
 * missing allocation or a bad propagated value. 1: supervise with *retries_out
 * retries; 0: carry on as a plain srun. */
int hpod_auto_resume_local_decision(int retries, int option_seen, int* retries_out);

/* Runs the supervisor. Returns srun's exit code (>= 0), which the caller passes to
 * _exit, or -1 when supervising could not begin (no step was started): the caller
 * then carries on as a plain srun. */
int hpod_auto_resume_supervise(int retries);

/* A child srun of a supervisor, local_user_init: tells the supervisor its step id. */
void hpod_auto_resume_report_step(unsigned int step_id);

/* slurmstepd, task_init: HyperPod's per-task line
 * "[Auto Resume] Info: JobID: <j> StepID: <s> TaskID: <t> process_task_init";
 * nothing for the batch and extern steps. */
void hpod_auto_resume_task_init(unsigned int job_id, unsigned int step_id, unsigned int task_id);

#ifdef __cplusplus
}
#endif

#endif /* HPOD_SLURM_SPANK_BRIDGE_H_ */
