// AWS Signature Version 4, header form, exactly as botocore signs (the AWS CLI and
// boto3 use it, and hpodd verifies against it: src/auth/sigv4.h).
//
// Pure JavaScript over @noble/hashes on purpose: WebCrypto's `crypto.subtle` exists
// only in secure contexts (https or localhost), and the console must also work when
// hpodd is reached over plain http on another host. Synchronous, no I/O; the
// caller passes the clock.

import { hmac } from '@noble/hashes/hmac';
import { sha256 } from '@noble/hashes/sha2';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils';

// botocore never signs these (SIGNED_HEADERS_BLACKLIST): proxies and browsers
// change them.
const UNSIGNED_HEADERS = new Set(['expect', 'transfer-encoding', 'user-agent', 'x-amzn-trace-id']);

const UNRESERVED = /[A-Za-z0-9\-_.~]/;

/** @param {string|Uint8Array} data */
export function sha256Hex(data) {
  return bytesToHex(sha256(typeof data === 'string' ? utf8ToBytes(data) : data));
}

/** Percent-encodes every UTF-8 byte of `s` except the unreserved set and `keep`. */
function encode(s, keep = '') {
  let out = '';
  for (const ch of s) {
    if (UNRESERVED.test(ch) || keep.includes(ch)) {
      out += ch;
      continue;
    }
    for (const b of utf8ToBytes(ch)) out += '%' + b.toString(16).toUpperCase().padStart(2, '0');
  }
  return out;
}

/** As encode(), but a valid %XX escape already in `s` is kept (botocore signs a
 * URL's query as it stands; a raw character still has to be encoded). */
function encodeQueryPart(s) {
  let out = '';
  for (let i = 0; i < s.length; ) {
    if (s[i] === '%' && /^[0-9A-Fa-f]{2}$/.test(s.slice(i + 1, i + 3))) {
      out += s.slice(i, i + 3);
      i += 3;
      continue;
    }
    const ch = String.fromCodePoint(s.codePointAt(i));
    out += encode(ch);
    i += ch.length;
  }
  return out;
}

/** RFC 3986 5.2.4, and consecutive slashes collapse (botocore's remove_dot_segments). */
export function removeDotSegments(path) {
  if (!path) return '';
  const out = [];
  for (const seg of path.split('/')) {
    if (!seg || seg === '.') continue;
    if (seg === '..') out.pop();
    else out.push(seg);
  }
  const first = path[0] === '/' ? '/' : '';
  const last = path[path.length - 1] === '/' && out.length ? '/' : '';
  return first + out.join('/') + last;
}

/** The canonical URI: dot segments removed, then every byte but unreserved and '/'
 * encoded (an existing %XX is encoded again, as botocore does for non-S3 services). */
export function canonicalUri(path) {
  return encode(removeDotSegments(path) || '/', '/');
}

/** The canonical query string: key=value pairs sorted by key, then value. */
export function canonicalQuery(query) {
  if (!query) return '';
  const pairs = query.split('&').map((pair) => {
    const eq = pair.indexOf('=');
    const key = eq < 0 ? pair : pair.slice(0, eq);
    const value = eq < 0 ? '' : pair.slice(eq + 1);
    return [encodeQueryPart(key), encodeQueryPart(value)];
  });
  pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  return pairs.map(([k, v]) => k + '=' + v).join('&');
}

/** 20150830T123600Z for a Date. */
export function amzDate(date) {
  return date.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
}

/**
 * Signs a request in header form.
 *
 * @param {object} req
 * @param {string} req.method        'POST'
 * @param {string} req.target        path and optional '?query', as on the request line
 * @param {Array<[string,string]>} req.headers  must include Host; X-Amz-Date and
 *     X-Amz-Security-Token are added here
 * @param {string} req.body          sent as UTF-8
 * @param {object} creds             {accessKeyId, secretAccessKey, sessionToken?}
 * @param {string} region
 * @param {string} service
 * @param {Date} now
 * @returns {{headers: Array<[string,string]>, canonicalRequest: string,
 *     stringToSign: string, authorization: string}} headers: the request's headers
 *     plus X-Amz-Date, X-Amz-Security-Token (if any) and Authorization
 */
export function signRequest(req, creds, region, service, now) {
  const date = amzDate(now);
  const day = date.slice(0, 8);
  const headers = req.headers.filter(([name]) => !/^(x-amz-date|authorization)$/i.test(name));
  headers.push(['X-Amz-Date', date]);
  if (creds.sessionToken) headers.push(['X-Amz-Security-Token', creds.sessionToken]);

  // Lower-cased names, sorted; repeated headers joined by ','; values trimmed with
  // inner runs of whitespace collapsed to one space.
  const byName = new Map();
  for (const [name, value] of headers) {
    const key = name.toLowerCase();
    if (UNSIGNED_HEADERS.has(key)) continue;
    const v = String(value).split(/\s+/).filter(Boolean).join(' ');
    byName.set(key, byName.has(key) ? byName.get(key) + ',' + v : v);
  }
  const names = [...byName.keys()].sort();
  const signedHeaders = names.join(';');
  const canonicalHeaders = names.map((n) => n + ':' + byName.get(n) + '\n').join('');

  const q = req.target.indexOf('?');
  const path = q < 0 ? req.target : req.target.slice(0, q);
  const query = q < 0 ? '' : req.target.slice(q + 1);
  const canonicalRequest = [
    req.method.toUpperCase(),
    canonicalUri(path),
    canonicalQuery(query),
    canonicalHeaders,
    signedHeaders,
    sha256Hex(req.body || ''),
  ].join('\n');

  const scope = `${day}/${region}/${service}/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', date, scope, sha256Hex(canonicalRequest)].join('\n');
  const mac = (key, data) => hmac(sha256, key, utf8ToBytes(data));
  let key = mac(utf8ToBytes('AWS4' + creds.secretAccessKey), day);
  key = mac(key, region);
  key = mac(key, service);
  key = mac(key, 'aws4_request');
  const signature = bytesToHex(mac(key, stringToSign));
  const authorization =
    `AWS4-HMAC-SHA256 Credential=${creds.accessKeyId}/${scope}, ` +
    `SignedHeaders=${signedHeaders}, Signature=${signature}`;
  headers.push(['Authorization', authorization]);
  return { headers, canonicalRequest, stringToSign, authorization };
}
