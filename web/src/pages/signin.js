// Sign in with an hpod access key. The key is checked by calling
// HpodGetCallerIdentity with it (a wrong key is refused by the API, and its
// message is shown); the answer's Role decides which actions the console shows.

import { ApiError } from '../lib/api.js';
import { errorBox, field, h, replace } from '../lib/dom.js';

const DEFAULT_REGION = 'us-west-2';

export function renderSignIn(page, { clientFor, signedIn }) {
  const keyId = h('input', { type: 'text', name: 'access-key-id', autocomplete: 'off',
    spellcheck: 'false', testid: 'signin-key-id' });
  const secret = h('input', { type: 'password', name: 'secret-access-key', autocomplete: 'off',
    testid: 'signin-secret' });
  const region = h('input', { type: 'text', name: 'region', value: DEFAULT_REGION,
    autocomplete: 'off', spellcheck: 'false', testid: 'signin-region' });
  const status = h('div', { class: 'status-line', 'aria-live': 'polite' });
  const submit = h('button', { type: 'submit', testid: 'signin-submit' }, 'Sign in');

  const form = h('form', { class: 'panel narrow', testid: 'signin-form', novalidate: true,
    onsubmit: async (ev) => {
      ev.preventDefault();
      const creds = { accessKeyId: keyId.value.trim(), secretAccessKey: secret.value,
        region: region.value.trim() || DEFAULT_REGION };
      submit.disabled = true;
      replace(status, 'Checking the key…');
      try {
        const identity = await clientFor(creds).call('HpodGetCallerIdentity', {});
        if (page.disposed) return;
        signedIn(creds, identity);
      } catch (err) {
        if (page.disposed) return;
        replace(status, errorBox(err instanceof ApiError ? err : String(err), 'signin-error'));
        submit.disabled = false;
      }
    } },
  h('h1', {}, 'Sign in'),
  h('p', {}, 'Use an hpod access key (hpodd create-key). It is kept in this tab only and ' +
    'every request is signed with it in the browser.'),
  field('Endpoint', h('input', { type: 'text', value: window.location.origin, readonly: true,
    testid: 'signin-endpoint' }), 'This page’s own hpodd'),
  field('Access key ID', keyId),
  field('Secret access key', secret),
  field('Region', region, 'The region hpodd signs for (hpodd --region)'),
  h('div', { class: 'actions' }, submit),
  status);
  queueMicrotask(() => keyId.focus());
  return form;
}
