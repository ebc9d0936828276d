// The same hooks as hooks.ts, served as webhooks (docs/reference/hooks.md#signatures): an HTTP handler that
// verifies each request's signature with the MapController's own key (`outrigger hook-key`) before it answers.
// Serve it behind TLS and name its URLs in the MapController (hooks.map.webhook.url, hooks.tombstone.webhook.url),
// the same URLs given here: the signature covers the URL, so a request signed for another one is refused.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createVerifier } from '../../shared/hooks/signature.ts';
import type { MapHookRequest, TombstoneHookRequest } from '../../shared/map/api.ts';
import { keepSnapshots, mapSnapshots } from './hooks.ts';

const MAX_BODY_BYTES = 8 * 1024 * 1024;

export interface WebhookOptions {
  /** The controller's key, from `outrigger hook-key <MapController>`; two while the deployment's secret is rotated. */
  keys: string | string[];
  /** Where the MapController calls each hook, exactly as its spec writes the URLs. */
  urls: { map: string; tombstone: string };
}

/** `http.createServer(snapshotWebhook(...))`: 401 for a request not signed for this receiver, else the hook's answer. */
export function snapshotWebhook(opts: WebhookOptions): (req: IncomingMessage, res: ServerResponse) => void {
  const routes = {
    [new URL(opts.urls.map).pathname]: { verify: createVerifier({ keys: opts.keys, url: opts.urls.map }), answer: mapSnapshots },
    [new URL(opts.urls.tombstone).pathname]: {
      verify: createVerifier({ keys: opts.keys, url: opts.urls.tombstone }),
      answer: (req: MapHookRequest | TombstoneHookRequest) => keepSnapshots(req as TombstoneHookRequest),
    },
  };
  return (req, res) => {
    const route = req.method === 'POST' ? routes[new URL(req.url ?? '/', 'http://receiver').pathname] : undefined;
    if (!route) {
      res.writeHead(404).end();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.byteLength;
      if (size > MAX_BODY_BYTES) req.destroy();
      else chunks.push(c);
    });
    req.on('end', () => {
      // Verified over the raw bytes, before anything is parsed.
      const body = Buffer.concat(chunks).toString('utf8');
      const verdict = route.verify({ headers: req.headers, body });
      if (!verdict.ok) {
        res.writeHead(401, { 'content-type': 'text/plain' }).end(verdict.reason);
        return;
      }
      const answer = route.answer(JSON.parse(body) as MapHookRequest);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    });
  };
}
