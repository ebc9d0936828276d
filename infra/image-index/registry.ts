// The three calls of the OCI distribution API the image index needs (https://github.com/opencontainers/distribution-spec):
// read a manifest, read a blob, write a manifest. ECR serves this API on its registry host with a Basic
// credential from GetAuthorizationToken; the tests use a registry on loopback (docs/contributing/test-beds.md#tests).
import type { Served } from './manifests.ts';

export interface Registry {
  /** The manifest `reference` (a tag or digest) names, or undefined when there is none. */
  manifest(repository: string, reference: string, accept: readonly string[]): Promise<Served | undefined>;
  blob(repository: string, digest: string): Promise<Uint8Array>;
  putManifest(repository: string, tag: string, manifest: Served): Promise<void>;
}

export interface RegistryOptions {
  /** `https://<host>`, or `http://127.0.0.1:<port>` for a local registry. */
  origin: string;
  /** The Authorization header's value, if the registry wants one. */
  authorization?: string;
  /** Per request (default 20 s). */
  timeoutMs?: number;
}

/** A tag, or a sha256 digest (https://github.com/opencontainers/distribution-spec/blob/main/spec.md#pulling-manifests). */
const REFERENCE = /^(sha256:[0-9a-f]{64}|[A-Za-z0-9_][A-Za-z0-9._-]{0,127})$/;

export function httpRegistry(opts: RegistryOptions): Registry {
  const timeout = opts.timeoutMs ?? 20_000;
  const auth: Record<string, string> = opts.authorization ? { authorization: opts.authorization } : {};
  // A reference goes into the path as it is: `sha256:<hex>` percent-encoded is another URI (RFC 3986, 2.2), which
  // not every registry decodes; so only what the distribution spec allows in one is taken.
  const url = (repository: string, kind: 'manifests' | 'blobs', ref: string) => {
    if (!REFERENCE.test(ref)) throw new Error(`${JSON.stringify(ref)} is neither a tag nor a sha256 digest`);
    return `${opts.origin}/v2/${repository}/${kind}/${ref}`;
  };
  const failed = async (what: string, res: Response) =>
    new Error(`${what}: the registry answered ${res.status}${await registryError(res)}`);

  return {
    async manifest(repository, reference, accept) {
      const what = `GET ${repository}:${reference}`;
      const res = await fetch(url(repository, 'manifests', reference), {
        headers: { ...auth, accept: accept.join(', ') },
        signal: AbortSignal.timeout(timeout),
      });
      if (res.status === 404) return undefined;
      if (!res.ok) throw await failed(what, res);
      return { mediaType: res.headers.get('content-type') ?? '', bytes: new Uint8Array(await res.arrayBuffer()) };
    },
    async blob(repository, digest) {
      const what = `GET blob ${digest} of ${repository}`;
      // ECR answers with a redirect to a signed S3 URL, which refuses a second credential: fetch drops the
      // Authorization header on a redirect to another origin (https://fetch.spec.whatwg.org/#http-redirect-fetch).
      const res = await fetch(url(repository, 'blobs', digest), { headers: auth, signal: AbortSignal.timeout(timeout) });
      if (!res.ok) throw await failed(what, res);
      return new Uint8Array(await res.arrayBuffer());
    },
    async putManifest(repository, tag, manifest) {
      const res = await fetch(url(repository, 'manifests', tag), {
        method: 'PUT',
        headers: { ...auth, 'content-type': manifest.mediaType },
        body: manifest.bytes,
        signal: AbortSignal.timeout(timeout),
      });
      if (!res.ok) throw await failed(`PUT ${repository}:${tag}`, res);
    },
  };
}

/** The registry's own words for a failure: the distribution API's `{errors: [{code, message}]}`. */
async function registryError(res: Response): Promise<string> {
  const text = await res.text().catch(() => '');
  try {
    const errors = (JSON.parse(text) as { errors?: { code?: string; message?: string }[] }).errors ?? [];
    if (errors.length > 0) return `: ${errors.map((e) => [e.code, e.message].filter(Boolean).join(' ')).join('; ')}`;
  } catch {
    // Not the API's error body: the start of whatever it is says more than nothing.
  }
  return text ? `: ${text.slice(0, 200)}` : '';
}
