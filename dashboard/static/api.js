// The JSON API under /api/v1: GETs with the session cookie; POSTs also
// with the CSRF value from /session and a JSON body.
//
// Hosted (the dashboard stack), /config.json names the Cognito Hosted UI:
// the page signs in with the authorization code flow and PKCE, keeps the
// access token in sessionStorage (this tab only) and sends it as a bearer
// token; no cookie, no CSRF value. Locally /config.json is not served.

let csrf = null;
let auth = null;

const TOKEN = 'rayito.dashboard.token';
const VERIFIER = 'rayito.dashboard.verifier';

function b64url(bytes) {
  let s = '';
  for (const b of new Uint8Array(bytes)) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

async function signIn(cfg) {
  const redirect = `${location.origin}/`;
  const params = new URLSearchParams(location.search);
  const code = params.get('code');
  const verifier = sessionStorage.getItem(VERIFIER);
  if (code && verifier) {
    sessionStorage.removeItem(VERIFIER);
    history.replaceState(null, '', '/');
    const res = await fetch(`${cfg.domain}/oauth2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        client_id: cfg.clientId,
        code,
        redirect_uri: redirect,
        code_verifier: verifier,
      }),
    });
    const body = await res.json().catch(() => ({}));
    if (res.ok && body.access_token) {
      sessionStorage.setItem(TOKEN, body.access_token);
      return body.access_token;
    }
  }
  const fresh = b64url(crypto.getRandomValues(new Uint8Array(32)));
  sessionStorage.setItem(VERIFIER, fresh);
  const challenge = b64url(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(fresh)));
  const url = new URL(`${cfg.domain}/oauth2/authorize`);
  url.search = new URLSearchParams({
    response_type: 'code',
    client_id: cfg.clientId,
    redirect_uri: redirect,
    scope: cfg.scope || 'openid',
    code_challenge_method: 'S256',
    code_challenge: challenge,
  }).toString();
  location.assign(url.toString());
  return new Promise(() => {});
}

// The headers that authenticate a call: none locally (the cookie does),
// the bearer token hosted.
async function authHeaders() {
  if (!auth) {
    auth = (async () => {
      const res = await fetch('/config.json', { credentials: 'same-origin', cache: 'no-store' });
      if (!res.ok) return null;
      const cfg = ((await res.json().catch(() => null)) || {}).auth;
      if (!cfg || cfg.type !== 'cognito') return null;
      return sessionStorage.getItem(TOKEN) || signIn(cfg);
    })();
  }
  const token = await auth;
  return token ? { authorization: `Bearer ${token}` } : {};
}

// A 401 hosted: the token expired; sign in again.
function expired(res, headers) {
  if (res.status === 401 && headers.authorization) {
    sessionStorage.removeItem(TOKEN);
    auth = null;
    location.reload();
  }
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function parse(res) {
  const body = await res.json().catch(() => null);
  if (!res.ok) {
    const err = body && body.error ? body.error : {};
    throw new ApiError(res.status, err.code || `http_${res.status}`, err.message || res.statusText);
  }
  return body;
}

export async function get(path, params) {
  const url = new URL(`/api/v1${path}`, location.origin);
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== null && v !== undefined && v !== '') url.searchParams.set(k, v);
  }
  const headers = await authHeaders();
  const res = await fetch(url, { credentials: 'same-origin', cache: 'no-store', headers });
  expired(res, headers);
  return parse(res);
}

export async function post(path, body) {
  if (!csrf) csrf = (await get('/session')).csrf_token;
  const auth = await authHeaders();
  const res = await fetch(`/api/v1${path}`, {
    method: 'POST',
    credentials: 'same-origin',
    cache: 'no-store',
    headers: { 'content-type': 'application/json', 'x-rayito-csrf': csrf, ...auth },
    body: JSON.stringify(body),
  });
  expired(res, auth);
  return parse(res);
}
