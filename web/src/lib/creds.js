// Where the signed-in key lives: sessionStorage only (gone when the tab closes,
// never sent anywhere: no cookies, no localStorage, never logged). Sign out
// removes it.

const KEY = 'hpod.console.credentials';

/** @typedef {{accessKeyId: string, secretAccessKey: string, region: string,
 *     role?: string}} Credentials */

/** @returns {Credentials|null} */
export function loadCredentials(storage = globalThis.sessionStorage) {
  try {
    const c = JSON.parse(storage.getItem(KEY) || 'null');
    if (c && c.accessKeyId && c.secretAccessKey && c.region) return c;
  } catch {
    // A damaged entry is the same as none.
  }
  return null;
}

/** @param {Credentials} creds */
export function saveCredentials(creds, storage = globalThis.sessionStorage) {
  const { accessKeyId, secretAccessKey, region, role } = creds;
  storage.setItem(KEY, JSON.stringify({ accessKeyId, secretAccessKey, region, role }));
}

export function clearCredentials(storage = globalThis.sessionStorage) {
  storage.removeItem(KEY);
}
