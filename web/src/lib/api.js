// hpodd's public API as the console calls it: AWS JSON 1.1 over `POST /` on the
// page's own origin, every call signed with SigV4 (service "sagemaker") exactly as
// the AWS CLI signs it. There is no other way in: the console has no private
// back door.

import { signRequest } from './sigv4.js';

/** An API error as hpodd gives it: {"__type": "...", "message": "..."}. */
export class ApiError extends Error {
  /**
   * @param {string} type     the error's __type (e.g. "AccessDeniedException")
   * @param {string} message  the API's message, shown to the user as given
   * @param {number} status   the HTTP status (0: the request never got an answer)
   */
  constructor(type, message, status) {
    super(message);
    this.name = 'ApiError';
    this.type = type;
    this.status = status;
  }

  /** "Type: message", the way the console shows every failed call. */
  toString() {
    return this.type ? `${this.type}: ${this.message}` : this.message;
  }
}

/** Reads an AWS JSON error body; types may carry a namespace prefix ("ns#Type"). */
export function parseError(status, text) {
  let type = '';
  let message = '';
  try {
    const body = JSON.parse(text);
    type = String(body.__type || body.code || '');
    message = String(body.message ?? body.Message ?? '');
  } catch {
    message = text;
  }
  if (type.includes('#')) type = type.slice(type.lastIndexOf('#') + 1);
  if (!message) message = `HTTP ${status}`;
  return new ApiError(type, message, status);
}

/** Retries of a throttled call: after about 100, 200 and 400 ms. */
const THROTTLE_RETRIES = 3;

/**
 * One signed-in client. `fetchFn` and `now` are injectable for tests.
 *
 * Thread contract: the page has one thread; calls may overlap (each is its own fetch).
 */
export class ApiClient {
  /**
   * @param {{accessKeyId: string, secretAccessKey: string, sessionToken?: string,
   *     region: string}} creds
   * @param {{host: string, origin: string}} location  the page's location (endpoint)
   */
  constructor(creds, location, fetchFn = globalThis.fetch.bind(globalThis), now = () => new Date(),
    sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))) {
    this.creds = creds;
    this.location = location;
    this.fetchFn = fetchFn;
    this.now = now;
    this.sleep = sleep;
  }

  /**
   * Calls `SageMaker.<operation>` with `input`; resolves to the parsed response
   * object, rejects with an ApiError (the API's own type and message, or type ""
   * when the network failed). A ThrottlingException is retried after a short
   * jittered backoff, as the AWS SDKs do (hpodd answers one training query at a
   * time, and a page's polls may meet).
   */
  async call(operation, input = {}) {
    for (let attempt = 0; ; attempt += 1) {
      try {
        return await this.callOnce(operation, input);
      } catch (err) {
        if (!(err instanceof ApiError) || err.type !== 'ThrottlingException' ||
            attempt >= THROTTLE_RETRIES) throw err;
        await this.sleep((100 << attempt) * (0.5 + Math.random()));
      }
    }
  }

  /** One signed request (signed anew each time: the signature carries the time). */
  async callOnce(operation, input) {
    const body = JSON.stringify(input);
    // location.host leaves out a default port, as the Host header the browser
    // sends does, so the signed host is the one hpodd sees.
    const headers = [
      ['Host', this.location.host],
      ['Content-Type', 'application/x-amz-json-1.1'],
      ['X-Amz-Target', `SageMaker.${operation}`],
    ];
    const signed = signRequest({ method: 'POST', target: '/', headers, body }, this.creds,
      this.creds.region, 'sagemaker', this.now());
    // The browser sets Host itself (and refuses a script that tries).
    const sent = signed.headers.filter(([name]) => name.toLowerCase() !== 'host');
    let response;
    try {
      response = await this.fetchFn(this.location.origin + '/', {
        method: 'POST', headers: sent, body, credentials: 'omit', cache: 'no-store',
      });
    } catch (err) {
      throw new ApiError('', `Could not reach hpodd: ${err.message}`, 0);
    }
    const text = await response.text();
    if (!response.ok) throw parseError(response.status, text);
    return text ? JSON.parse(text) : {};
  }

  /** Calls a paginated List operation until NextToken runs out; returns all `key` items. */
  async listAll(operation, input, key) {
    const items = [];
    let token;
    do {
      const page = await this.call(operation, token ? { ...input, NextToken: token } : input);
      items.push(...(page[key] || []));
      token = page.NextToken;
    } while (token);
    return items;
  }
}
