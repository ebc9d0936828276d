// A Secrets Manager endpoint on loopback that answers GetSecretValue for the secrets it is given, and nothing else:
// how a function in its Lambda container (`sam local invoke`, or the local runtime's `--lambda-containers`) reaches a
// local cluster as a deployed function reaches one outside EKS, with `secret` access (the cluster's bearer token in
// Secrets Manager, shared/kube/secret-token.ts). The SDK in the container is pointed at it by
// AWS_ENDPOINT_URL_SECRETS_MANAGER, which every function declares (infra/functions.ts FUNCTION_ENVIRONMENT).
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SecretsEndpoint {
  /** AWS_ENDPOINT_URL_SECRETS_MANAGER for a client of it. */
  endpoint: string;
  /** How many GetSecretValue calls it answered with a secret, by secret id. */
  reads: Map<string, number>;
  close(): Promise<void>;
}

/** Serves `secrets` (secret ARN -> its string value) on 127.0.0.1, in the AWS JSON 1.1 protocol the SDK speaks. */
export async function startSecretsEndpoint(secrets: Readonly<Record<string, string>>): Promise<SecretsEndpoint> {
  const reads = new Map<string, number>();
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/x-amz-json-1.1' });
      res.end(JSON.stringify(body));
    };
    const action = String(req.headers['x-amz-target'] ?? '');
    let id = '';
    try {
      id = String((JSON.parse(Buffer.concat(chunks).toString('utf8')) as { SecretId?: unknown }).SecretId ?? '');
    } catch {
      reply(400, { __type: 'InvalidRequestException', message: 'the request is not JSON' });
      return;
    }
    if (action !== 'secretsmanager.GetSecretValue') {
      reply(400, { __type: 'InvalidRequestException', message: `this endpoint answers GetSecretValue only, not ${action}` });
      return;
    }
    const value = secrets[id];
    if (value === undefined) {
      reply(400, { __type: 'ResourceNotFoundException', message: `Secrets Manager can't find the specified secret: ${id}` });
      return;
    }
    reads.set(id, (reads.get(id) ?? 0) + 1);
    const name = id.split(':secret:')[1] ?? id;
    reply(200, {
      ARN: id,
      Name: name,
      SecretString: value,
      VersionId: randomUUID(),
      VersionStages: ['AWSCURRENT'],
      CreatedDate: Date.now() / 1000,
    });
  };
  const server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    reads,
    close: () => new Promise<void>((ok) => server.close(() => ok())),
  };
}
