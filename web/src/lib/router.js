// Hash routes (#/clusters/NAME/nodes/ID, #/hosts/ID): the console is one static page, so
// hpodd serves only / and /assets/*, and a reload keeps the place.

const ROUTES = [
  ['signin', /^\/signin$/],
  ['clusters', /^\/clusters$/],
  ['create', /^\/create$/],
  ['training', /^\/clusters\/([^/]+)\/training$/],
  ['node', /^\/clusters\/([^/]+)\/nodes\/([^/]+)$/],
  ['cluster', /^\/clusters\/([^/]+)$/],
  ['hosts', /^\/hosts$/],
  ['host', /^\/hosts\/([^/]+)$/],
];

/** '#/clusters/a%20b' → {name: 'cluster', params: ['a b']}; unknown → clusters.
 * A malformed escape (#/clusters/%E0, typed or pasted) is an unknown route too:
 * decodeURIComponent throws on it, and a throw here would leave the page blank. */
export function parseRoute(hash) {
  const path = (hash || '').replace(/^#/, '') || '/clusters';
  for (const [name, re] of ROUTES) {
    const m = re.exec(path);
    if (!m) continue;
    try {
      return { name, params: m.slice(1).map(decodeURIComponent) };
    } catch (err) {
      if (!(err instanceof URIError)) throw err;
      break;
    }
  }
  return { name: 'clusters', params: [] };
}

/** The hash for a route: href('cluster', 'my-cluster'). */
export function href(name, ...params) {
  const p = params.map(encodeURIComponent);
  switch (name) {
    case 'cluster': return `#/clusters/${p[0]}`;
    case 'node': return `#/clusters/${p[0]}/nodes/${p[1]}`;
    case 'training': return `#/clusters/${p[0]}/training`;
    case 'host': return `#/hosts/${p[0]}`;
    default: return `#/${name}`;
  }
}
