// What a page gets from the app: the signed-in client, the caller's role, and a
// lifetime. Everything a page starts (polls, sockets, terminals) is tied to
// onDispose so that leaving the page stops it.

import { Poller } from './poller.js';

export class PageContext {
  /**
   * @param {import('./api.js').ApiClient|null} api
   * @param {{accessKeyId: string, role: string}|null} identity
   * @param {(hash: string) => void} navigate
   */
  constructor(api, identity, navigate) {
    this.api = api;
    this.identity = identity;
    this.navigate = navigate;
    this.disposed = false;
    this.disposers = [];
  }

  /** Admin actions are shown only to admin keys (the API refuses others anyway). */
  get isAdmin() {
    return this.identity?.role === 'admin';
  }

  onDispose(fn) {
    if (this.disposed) fn();
    else this.disposers.push(fn);
  }

  /**
   * Runs `fn` now and again `intervalMs` after each run ends (never two at once),
   * until the page goes away; paused while the tab is hidden. `fn` handles its
   * own errors (one that throws waits longer: Poller).
   */
  poll(fn, intervalMs) {
    return this.poller(fn, { intervalMs });
  }

  /** A started Poller (lib/poller.js) that stops when the page goes away. */
  poller(tick, options) {
    const p = new Poller(tick, options);
    this.onDispose(() => p.stop());
    if (!this.disposed) p.start();
    return p;
  }

  dispose() {
    this.disposed = true;
    for (const fn of this.disposers.splice(0)) {
      try {
        fn();
      } catch (err) {
        console.error('page cleanup failed', err);
      }
    }
  }
}
