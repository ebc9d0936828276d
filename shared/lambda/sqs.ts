// The SQS client of a function, made on first use: most invocations send nothing (no dead letter, no sync
// request), and loading the SDK's SQS client at import costs every cold start about 100 ms.
import type { SQSClient } from '@aws-sdk/client-sqs';

let client: Promise<SQSClient> | undefined;

export function sqsClient(): Promise<SQSClient> {
  return (client ??= import('@aws-sdk/client-sqs').then(({ SQSClient }) => new SQSClient({})));
}
