// One chain of polls: a tick runs, and the next one is timed from its end, so a
// page never has two of its requests in flight however slow hpodd answers. A tick
// that fails doubles the wait (up to maxDelayMs) so that a busy or unreachable
// hpodd is not hammered; one that succeeds goes back to the interval. Nothing is
// polled while the tab is hidden (document.visibilityState): it resumes, at once,
// when the tab is shown again.

/**
 * Thread contract: the page has one thread; ticks never overlap, and run()
 * calls are serialised with them (one request of the chain at a time).
 */
export class Poller {
  /**
   * @param {() => Promise<void>} tick  throws (rejects) when the tick failed
   * @param {object} options
   * @param {number} options.intervalMs   the wait after a tick that succeeded
   * @param {number} [options.maxDelayMs] the longest wait after failures (60 s)
   * @param {(err: unknown, retryInMs: number) => void} [options.onError]
   * @param {{setTimeout: Function, clearTimeout: Function}} [options.timers]
   * @param {EventTarget & {visibilityState: string}} [options.visibility]
   *     the document whose visibilityState pauses the chain (none in tests)
   */
  constructor(tick, { intervalMs, maxDelayMs = 60000, onError = () => {}, timers = globalThis,
    visibility = globalThis.document } = {}) {
    this.tick = tick;
    this.intervalMs = intervalMs;
    this.maxDelayMs = Math.max(maxDelayMs, intervalMs);
    this.onError = onError;
    this.timers = timers;
    this.visibility = visibility;
    this.delayMs = intervalMs;
    this.failures = 0;
    this.started = false;
    this.stopped = false;
    this.ticking = false;
    this.again = false;
    this.timer = null;
    this.queue = Promise.resolve();
    this.onVisibility = () => {
      if (this.hidden()) this.clearTimer();
      else this.wake();
    };
  }

  hidden() {
    return this.visibility?.visibilityState === 'hidden';
  }

  active() {
    return this.started && !this.stopped && !this.hidden();
  }

  start() {
    if (this.started) return;
    this.started = true;
    this.visibility?.addEventListener?.('visibilitychange', this.onVisibility);
    this.fire();
  }

  stop() {
    this.stopped = true;
    this.clearTimer();
    this.visibility?.removeEventListener?.('visibilitychange', this.onVisibility);
  }

  /** Runs a tick as soon as none is in flight (after a user's choice, say). */
  wake() {
    if (!this.started || this.stopped) return;
    this.clearTimer();
    this.fire();
  }

  /** Runs `fn` (a one-off request) between ticks, never beside one. */
  run(fn) {
    const p = this.queue.then(() => fn());
    this.queue = p.then(() => {}, () => {});
    return p;
  }

  clearTimer() {
    if (this.timer !== null) this.timers.clearTimeout(this.timer);
    this.timer = null;
  }

  async fire() {
    this.timer = null;
    if (this.ticking) {
      this.again = true;
      return;
    }
    if (!this.active()) return;
    this.ticking = true;
    try {
      await this.run(this.tick);
      this.failures = 0;
      this.delayMs = this.intervalMs;
    } catch (err) {
      this.failures += 1;
      this.delayMs = Math.min(this.maxDelayMs, this.intervalMs * 2 ** this.failures);
      if (!this.stopped) this.onError(err, this.delayMs);
    } finally {
      this.ticking = false;
    }
    const now = this.again;
    this.again = false;
    if (!this.active()) return;
    this.clearTimer();
    this.timer = this.timers.setTimeout(() => this.fire(), now ? 0 : this.delayMs);
  }
}
