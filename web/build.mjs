// Builds the console: src/main.js (and the CSS it imports) bundled by esbuild into
// content-hashed files under <out>/assets/, and <out>/index.html naming them.
// No inline script or style, nothing from another origin: hpodd serves the result
// with a Content-Security-Policy of 'self'.
//
//   node build.mjs [OUT_DIR]     (default ../build/web/dist)
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import * as esbuild from 'esbuild';

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.resolve(process.argv[2] || path.join(here, '..', 'build', 'web', 'dist'));
const assets = path.join(out, 'assets');

await rm(out, { recursive: true, force: true });
await mkdir(assets, { recursive: true });
const result = await esbuild.build({
  absWorkingDir: here,
  entryPoints: ['src/main.js'],
  bundle: true,
  format: 'esm',
  splitting: false,
  minify: true,
  sourcemap: false,
  // JavaScript modules in current Chromium and Firefox (ES2022: class fields, ?.).
  target: ['chrome111', 'firefox115', 'safari16'],
  outdir: assets,
  entryNames: '[name]-[hash]',
  assetNames: '[name]-[hash]',
  metafile: true,
  legalComments: 'linked',
  logLevel: 'warning',
});
const outputs = Object.entries(result.metafile.outputs)
  .filter(([, o]) => o.entryPoint === 'src/main.js' || o.cssBundle !== undefined);
const entry = outputs.find(([, o]) => o.entryPoint === 'src/main.js');
if (!entry) throw new Error('esbuild produced no bundle for src/main.js');
const js = path.basename(entry[0]);
const css = entry[1].cssBundle ? path.basename(entry[1].cssBundle) : null;
if (!css) throw new Error('esbuild produced no CSS bundle');
const template = await readFile(path.join(here, 'src', 'index.html'), 'utf8');
await writeFile(path.join(out, 'index.html'), template.replace('{{JS}}', js).replace('{{CSS}}', css));
console.log(`console built in ${path.relative(process.cwd(), out) || '.'}: ${js}, ${css}`);
