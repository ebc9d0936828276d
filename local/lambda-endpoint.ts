// The AWS Lambda Invoke API on loopback, for hooks written as Lambda handlers: the map function calls them with
// the real Lambda client, pointed here (OUTRIGGER_LAMBDA_ENDPOINT), so hook calls take the same path as in AWS.
// Like Lambda, a handler that throws answers 200 with X-Amz-Function-Error and the error as payload.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

// A hook handler takes whatever JSON its caller sends.
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the payload is the hook's own contract
export type LocalFunction = (event: any) => Promise<unknown>;

export interface LambdaEndpoint {
  url: string;
  invocations: Map<string, number>;
  stop(): Promise<void>;
}

const INVOKE = /^\/2015-03-31\/functions\/([^/]+)\/invocations$/;

export async function startLambdaEndpoint(functions: ReadonlyMap<string, LocalFunction>): Promise<LambdaEndpoint> {
  const invocations = new Map<string, number>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const match = INVOKE.exec(new URL(req.url ?? '/', 'http://x').pathname);
        const name = match ? decodeURIComponent(match[1]!).split(':').pop()! : '';
        const fn = functions.get(name);
        if (req.method !== 'POST' || !fn) {
          res.writeHead(404, { 'content-type': 'application/json', 'x-amzn-errortype': 'ResourceNotFoundException' });
          res.end(JSON.stringify({ Type: 'User', message: `Function not found: ${name}` }));
          return;
        }
        invocations.set(name, (invocations.get(name) ?? 0) + 1);
        try {
          const text = Buffer.concat(chunks).toString('utf8');
          const out = await fn(text ? JSON.parse(text) : {});
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify(out ?? null));
        } catch (err) {
          res.writeHead(200, { 'content-type': 'application/json', 'x-amz-function-error': 'Unhandled' });
          res.end(JSON.stringify({ errorType: (err as Error).name, errorMessage: (err as Error).message }));
        }
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    invocations,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The example hooks the local runtime serves, by the function names examples/snapshot-schedule/controller.yaml uses. */
export async function exampleHooks(): Promise<Map<string, LocalFunction>> {
  const hooks = await import('../examples/snapshot-schedule/hooks.ts');
  return new Map<string, LocalFunction>([
    ['outrigger-snapshot-schedule-map', hooks.map],
    ['outrigger-snapshot-schedule-tombstone', hooks.tombstone],
  ]);
}
