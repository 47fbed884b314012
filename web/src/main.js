// The hpod console: one page, hash routes, every call signed in the browser.
import './styles.css';

import { ApiClient } from './lib/api.js';
import { clearCredentials, loadCredentials, saveCredentials } from './lib/creds.js';
import { h, replace } from './lib/dom.js';
import { PageContext } from './lib/page.js';
import { href, parseRoute } from './lib/router.js';
import { renderCluster } from './pages/cluster.js';
import { renderClusters } from './pages/clusters.js';
import { renderCreate } from './pages/create.js';
import { renderHost } from './pages/host.js';
import { renderHosts } from './pages/hosts.js';
import { renderNode } from './pages/node.js';
import { renderSignIn } from './pages/signin.js';
import { renderTraining } from './pages/training.js';

const PAGES = {
  clusters: renderClusters,
  create: renderCreate,
  cluster: renderCluster,
  node: renderNode,
  training: renderTraining,
  hosts: renderHosts,
  host: renderHost,
};

const main = document.getElementById('main');
const nav = document.getElementById('nav');
let page = null;

function clientFor(creds) {
  return new ApiClient(creds, window.location);
}

function navigate(hash) {
  if (window.location.hash === hash) route();
  else window.location.hash = hash;
}

function signOut() {
  clearCredentials();
  navigate(href('signin'));
}

function renderNav(identity) {
  if (!identity) {
    replace(nav);
    return;
  }
  replace(nav,
    h('a', { href: href('clusters'), testid: 'nav-clusters' }, 'Clusters'),
    h('a', { href: href('hosts'), testid: 'nav-hosts' }, 'Hosts'),
    identity.role === 'admin' ? h('a', { href: href('create'), testid: 'nav-create' }, 'Create cluster') : null,
    h('span', { class: 'identity', testid: 'identity' },
      `${identity.accessKeyId} (${identity.role})`),
    h('button', { type: 'button', class: 'secondary', testid: 'signout', onclick: signOut }, 'Sign out'));
}

/** After a successful HpodGetCallerIdentity: keep the key for this tab. */
function signedIn(creds, identity) {
  saveCredentials({ ...creds, role: identity.Role });
  navigate(href('clusters'));
}

function route() {
  if (page) page.dispose();
  const r = parseRoute(window.location.hash);
  const creds = loadCredentials();
  if (!creds || r.name === 'signin') {
    if (creds && r.name === 'signin') clearCredentials();
    renderNav(null);
    page = new PageContext(null, null, navigate);
    replace(main, renderSignIn(page, { clientFor, signedIn }));
    document.title = 'Sign in · hpod console';
    return;
  }
  const identity = { accessKeyId: creds.accessKeyId, role: creds.role || 'user' };
  renderNav(identity);
  page = new PageContext(clientFor(creds), identity, navigate);
  const view = PAGES[r.name](page, ...r.params);
  replace(main, view);
  const heading = main.querySelector('h1');
  document.title = `${heading ? heading.textContent : 'hpod'} · hpod console`;
}

window.addEventListener('hashchange', route);
route();

// The bundle's module exports: what any script of this origin could build from
// the key in sessionStorage anyway (the e2e test signs calls with them through
// `import()` of this very module, as the pages do). Nothing here is a back door:
// the API decides what a key may do.
export { ApiClient, loadCredentials };
