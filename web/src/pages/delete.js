// Deleting a cluster asks for its name to be typed, as the SageMaker console does:
// the button is enabled only when the text matches exactly.

import { errorBox, field, h, replace } from '../lib/dom.js';

/**
 * @param {import('../lib/page.js').PageContext} page
 * @param {string} name      the cluster to delete
 * @param {() => void} done  called after DeleteCluster was accepted
 * @param {() => void} [cancel]
 */
export function deleteClusterPanel(page, name, done, cancel) {
  const input = h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false',
    testid: 'delete-confirm-input' });
  const status = h('div', { 'aria-live': 'polite' });
  const button = h('button', { type: 'submit', class: 'danger', disabled: true,
    testid: 'delete-confirm-button' }, 'Delete cluster');
  input.addEventListener('input', () => {
    button.disabled = input.value !== name;
  });
  const form = h('form', { class: 'panel danger-zone', testid: 'delete-panel', novalidate: true,
    onsubmit: async (ev) => {
      ev.preventDefault();
      if (input.value !== name) return;
      button.disabled = true;
      replace(status, 'Deleting…');
      try {
        await page.api.call('DeleteCluster', { ClusterName: name });
        if (!page.disposed) done();
      } catch (err) {
        replace(status, errorBox(err, 'delete-error'));
        button.disabled = input.value !== name;
      }
    } },
  h('h2', {}, `Delete cluster ${name}`),
  h('p', {}, 'This terminates every node of the cluster. Its /fsx data stays on the host.'),
  field(`Type ${name} to confirm`, input),
  h('div', { class: 'actions' }, button,
    cancel ? h('button', { type: 'button', class: 'secondary', onclick: cancel }, 'Cancel') : null),
  status);
  queueMicrotask(() => input.focus());
  return form;
}
