// The ingest function's Function URL, the dead-letter queue for the requests it refuses (with its alarm), and the
// outputs a sender needs.
import { Validations } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { functions } from '../functions/index.ts';
import { deadLetterMetric, type Alarms } from './monitoring.ts';
import { output } from './names.ts';
import { INGEST_DEAD_LETTER_QUEUE } from '../shared/lambda/queues.ts';
import { deadLetterQueue, fifoName, tlsOnly } from './queues.ts';

/** Where the ingest function puts the requests it refuses (they may name no cluster, or one not served). */
export function ingestDeadLetter(scope: Construct): sqs.Queue {
  const queue = deadLetterQueue(scope, 'IngestDeadLetter', fifoName(scope, INGEST_DEAD_LETTER_QUEUE));
  tlsOnly(scope, 'IngestDeadLetterTlsOnly', [queue]);
  Validations.of(queue).acknowledge({
    id: 'AwsSolutions-SQS3',
    reason: 'It is a dead-letter queue: the ingest function puts the requests it refuses there, and nothing consumes it but an operator',
  });
  return queue;
}

/** The ingest function's URL (IAM auth), its dead-letter queue's alarm, and their outputs. */
export function addIngestUrl(
  scope: Construct,
  fns: ReadonlyMap<string, NodejsFunction>,
  deadLetter: sqs.Queue,
  alarms: Alarms,
): lambda.FunctionUrl {
  const ingest = functions.find((f) => f.functionUrl);
  if (!ingest) throw new Error('no function serves the ingest Function URL');
  const url = fns.get(ingest.name)!.addFunctionUrl({ authType: lambda.FunctionUrlAuthType.AWS_IAM });
  alarms.add(
    scope,
    'IngestDeadLetters',
    'The ingest dead-letter queue holds refused requests: read their reason attribute, fix the sender',
    deadLetterMetric(deadLetter),
    1,
    cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
  );
  output(
    scope,
    'IngestDeadLetterQueueUrl',
    "The ingest function's dead-letter queue: the requests it refused, each with its reason",
    deadLetter.queueUrl,
  );
  output(
    scope,
    'IngestUrl',
    "The ingest function's URL: requests must be SigV4-signed (service lambda); Knative events need ?cluster=<id>",
    url.url,
  );
  output(
    scope,
    'IngestFunctionArn',
    "What a signing proxy's role needs lambda:InvokeFunctionUrl and lambda:InvokeFunction on",
    fns.get(ingest.name)!.functionArn,
  );
  return url;
}
