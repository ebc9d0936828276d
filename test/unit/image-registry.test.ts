// The registry client's branches that the registry in the integration test (test/integration/forwarder-image.test.ts)
// never takes: ECR answers a blob read with a redirect to a signed S3 URL, which refuses a second credential
// ("Only one auth mechanism allowed"), and its errors come in the distribution API's error body.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { httpRegistry } from '../../infra/image-index/registry.ts';

const servers: Server[] = [];
async function serve(handle: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const server = createServer(handle);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
afterAll(() => Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve)))));

test("follows a blob's redirect without the registry's credential, which the storage would refuse", async () => {
  const seen: (string | undefined)[] = [];
  const storage = await serve((req, res) => {
    seen.push(req.headers.authorization);
    if (req.headers.authorization) res.writeHead(400).end('Only one auth mechanism allowed');
    else res.writeHead(200).end('{"os":"linux"}');
  });
  const origin = await serve((req, res) => {
    if (req.headers.authorization !== 'Basic QVdTOnNlY3JldA==') res.writeHead(401).end();
    else res.writeHead(307, { location: `${storage}/signed?X-Amz-Signature=abc` }).end();
  });
  const blob = await httpRegistry({ origin, authorization: 'Basic QVdTOnNlY3JldA==' }).blob('repo', `sha256:${'0'.repeat(64)}`);
  expect(new TextDecoder().decode(blob)).toBe('{"os":"linux"}');
  expect(seen).toEqual([undefined]);
});

test("names the registry's own error code and message, and the request", async () => {
  const origin = await serve((_, res) =>
    res
      .writeHead(400, { 'content-type': 'application/json' })
      .end(JSON.stringify({ errors: [{ code: 'TAG_INVALID', message: 'The image tag already exists and cannot be overwritten' }] })),
  );
  await expect(
    httpRegistry({ origin }).putManifest('repo', 'index-1', {
      mediaType: 'application/vnd.oci.image.index.v1+json',
      bytes: new Uint8Array(),
    }),
  ).rejects.toThrow('PUT repo:index-1: the registry answered 400: TAG_INVALID The image tag already exists and cannot be overwritten');
});

test('a manifest not there is undefined; a manifest read refused is an error', async () => {
  const origin = await serve((req, res) => res.writeHead(req.url!.endsWith('/missing') ? 404 : 403).end('denied'));
  const registry = httpRegistry({ origin });
  expect(await registry.manifest('repo', 'missing', [])).toBeUndefined();
  await expect(registry.manifest('repo', 'x', [])).rejects.toThrow('GET repo:x: the registry answered 403: denied');
});

test('puts a digest into the path as it is, not percent-encoded (another URI, which not every registry decodes), and refuses what is no reference', async () => {
  const paths: string[] = [];
  const origin = await serve((req, res) => {
    paths.push(req.url!);
    res.writeHead(200).end('{}');
  });
  const digest = `sha256:${'a'.repeat(64)}`;
  await httpRegistry({ origin }).blob('cdk-assets', digest);
  expect(paths).toEqual([`/v2/cdk-assets/blobs/${digest}`]);
  await expect(httpRegistry({ origin }).manifest('cdk-assets', '../x', [])).rejects.toThrow('"../x" is neither a tag nor a sha256 digest');
});
