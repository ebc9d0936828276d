// A request as an IAM-authenticated Lambda Function URL hands it to the ingest function: what the tests that post
// to the ingest handler send.
import { randomUUID } from 'node:crypto';
import type { LambdaFunctionURLEventWithIAMAuthorizer } from 'aws-lambda';

/** The IAM role the signing proxy runs as, and the session the Function URL names as its caller. */
export const SIGNER_ROLE = 'arn:aws:iam::111122223333:role/ingest-signer';
export const SIGNER = 'arn:aws:sts::111122223333:assumed-role/ingest-signer/proxy';

/** A Function URL request (payload format 2.0) signed by `caller`, with the body base64-encoded as the URL does for binary content types when asked. */
export function functionUrlEvent(
  body: string,
  opts: { headers?: Record<string, string>; cluster?: string; base64?: boolean; caller?: string } = {},
): LambdaFunctionURLEventWithIAMAuthorizer {
  const now = Date.now();
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: '/',
    rawQueryString: opts.cluster ? `cluster=${opts.cluster}` : '',
    headers: { 'content-type': 'application/json', host: 'abc.lambda-url.eu-west-1.on.aws', ...opts.headers },
    ...(opts.cluster ? { queryStringParameters: { cluster: opts.cluster } } : {}),
    requestContext: {
      accountId: '111122223333',
      apiId: 'abc',
      domainName: 'abc.lambda-url.eu-west-1.on.aws',
      domainPrefix: 'abc',
      http: { method: 'POST', path: '/', protocol: 'HTTP/1.1', sourceIp: '10.0.0.1', userAgent: 'Go-http-client/1.1' },
      requestId: randomUUID(),
      routeKey: '$default',
      stage: '$default',
      time: new Date(now).toISOString(),
      timeEpoch: now,
      authorizer: {
        iam: {
          accessKey: 'ASIA0000',
          accountId: '111122223333',
          callerId: 'AROA0000:proxy',
          cognitoIdentity: null,
          principalOrgId: 'o-example',
          userArn: opts.caller ?? SIGNER,
          userId: 'AROA0000:proxy',
        },
      },
    },
    body: opts.base64 ? Buffer.from(body).toString('base64') : body,
    isBase64Encoded: opts.base64 ?? false,
  };
}
