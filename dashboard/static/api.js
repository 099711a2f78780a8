// The JSON API under /api/v1: GETs with the session cookie; POSTs also
// with the CSRF value from /session and a JSON body.

let csrf = null;

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
  return parse(await fetch(url, { credentials: 'same-origin', cache: 'no-store' }));
}

export async function post(path, body) {
  if (!csrf) csrf = (await get('/session')).csrf_token;
  const res = await fetch(`/api/v1${path}`, {
    method: 'POST',
    credentials: 'same-origin',
    cache: 'no-store',
    headers: { 'content-type': 'application/json', 'x-rayito-csrf': csrf },
    body: JSON.stringify(body),
  });
  return parse(res);
}
