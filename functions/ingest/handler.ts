// The ingest function, behind an IAM-authenticated Function URL: watch events over HTTPS, from senders that
// cannot write to SQS themselves (Knative's ApiServerSource, through a signing proxy). A request is queued
// whole or not at all: refused input is answered 4xx and dead-lettered with its reason before anything is
// queued; a queue failure is answered 503, and a retry within SQS's five-minute deduplication window does not
// queue twice what went through (deduplication ids derive from the events).
// Its environment variables: docs/reference/configuration.md#the-ingest-function.
import middy from '@middy/core';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { APIGatewayProxyStructuredResultV2, LambdaFunctionURLEventWithIAMAuthorizer } from 'aws-lambda';
import { clustersFromEnv, ingestClustersOf } from '../../shared/clusters.ts';
import { deduplicationId, messageGroupId, type Envelope } from '../../shared/envelope/index.ts';
import { planIngest } from '../../shared/ingest/index.ts';
import { SqsDeadLetterSink, fitDeadLetter, type DeadLetterSink } from '../../shared/lambda/dead-letter.ts';
import { functionLogger } from '../../shared/lambda/logger.ts';
import { EVENTS_QUEUE, queueUrlsFromEnv } from '../../shared/lambda/queues.ts';
import { describeFailures, sendFifoMessages, type FifoFailure } from '../../shared/lambda/sqs.ts';

export interface EventQueue {
  /** Queues the envelopes; returns those the queue refused for what they are (resending cannot help), with why. */
  send(envelopes: Envelope[]): Promise<Array<{ envelope: Envelope; reason: string }>>;
}

/** Each cluster's events queue (`urlOf` names it): every envelope goes to the queue of the cluster it names. */
export class SqsEventQueue implements EventQueue {
  private readonly urlOf: (cluster: string) => string;
  private readonly client: SQSClient;
  constructor(urlOf: (cluster: string) => string, client = new SQSClient({})) {
    this.urlOf = urlOf;
    this.client = client;
  }

  async send(envelopes: Envelope[]): Promise<Array<{ envelope: Envelope; reason: string }>> {
    const refused: Array<{ envelope: Envelope; reason: string }> = [];
    const unsent: FifoFailure[] = [];
    for (const [cluster, forCluster] of Map.groupBy(envelopes, (e) => e.cluster)) {
      const messages = forCluster.map((e) => ({ body: JSON.stringify(e), group: messageGroupId(e), dedup: deduplicationId(e, 'ingest') }));
      for (const f of await sendFifoMessages(this.client, this.urlOf(cluster), messages)) {
        if (f.senderFault)
          refused.push({
            envelope: forCluster[messages.indexOf(f.message)]!,
            reason: `the events queue of cluster ${cluster} refused it: ${describeFailures([f])}`,
          });
        else unsent.push(f);
      }
    }
    if (unsent.length > 0) throw new Error(`SQS did not take ${unsent.length} event(s): ${describeFailures(unsent)}`);
    return refused;
  }
}

export interface IngestDeps {
  clusters: ReadonlySet<string>;
  /** The clusters a caller (an IAM ARN) may send events for: ingestClustersOf the cluster configuration. */
  allowed: (caller: string | undefined) => ReadonlySet<string>;
  events: EventQueue;
  deadLetter: DeadLetterSink;
}

function required(env: NodeJS.ProcessEnv, name: string): string {
  const value = env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

export function ingestDepsFromEnv(env: NodeJS.ProcessEnv = process.env): IngestDeps {
  const sqs = new SQSClient({});
  const configs = clustersFromEnv(env);
  const clusters = new Set(configs.map((c) => c.id));
  const queues = queueUrlsFromEnv(env);
  return {
    clusters,
    allowed: (caller) => ingestClustersOf(configs, caller),
    // planIngest refuses (and dead-letters) an event for a cluster not served before anything is queued.
    events: new SqsEventQueue((cluster) => {
      if (!clusters.has(cluster))
        throw new Error(`no events queue for cluster ${JSON.stringify(cluster)}: this deployment serves ${[...clusters].join(', ')}`);
      return queues.url(cluster, EVENTS_QUEUE);
    }, sqs),
    deadLetter: new SqsDeadLetterSink(required(env, 'OUTRIGGER_DEAD_LETTER_QUEUE_URL'), sqs),
  };
}

const logger = functionLogger('ingest');

function respond(statusCode: number, body: Record<string, unknown>): APIGatewayProxyStructuredResultV2 {
  return { statusCode, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
}

/** `deps` is resolved on the first request (a warm Lambda keeps it), so loading the module needs no environment. */
export function createIngestHandler(deps: () => IngestDeps) {
  let resolved: IngestDeps | undefined;
  return middy(async (event: LambdaFunctionURLEventWithIAMAuthorizer): Promise<APIGatewayProxyStructuredResultV2> => {
    const { clusters, allowed, events, deadLetter } = (resolved ??= deps());
    const body = event.body === undefined ? '' : event.isBase64Encoded ? Buffer.from(event.body, 'base64').toString('utf8') : event.body;
    // The Function URL's AWS_IAM auth has verified the signature; this is who signed. Read defensively: a URL
    // deployed with another auth type would have no authorizer, and then no caller may speak for any cluster.
    const iam = (event.requestContext as Partial<typeof event.requestContext>).authorizer?.iam as
      Partial<LambdaFunctionURLEventWithIAMAuthorizer['requestContext']['authorizer']['iam']> | undefined;
    const caller = iam?.userArn;
    const request = {
      method: event.requestContext.http.method,
      headers: event.headers,
      query: event.queryStringParameters ?? {},
      body,
      caller,
    };
    const plan = planIngest(request, clusters, allowed(caller));
    if (!plan.ok) {
      try {
        for (const letter of plan.deadLetters) await deadLetter.send({ ...letter, source: 'ingest' });
      } catch (err) {
        logger.error('a refused request could not be dead-lettered', { problem: plan.problem, error: String(err) });
        return respond(503, { error: `${plan.problem}; and it could not be recorded in the dead-letter queue, retry` });
      }
      logger.warn('request refused', { status: plan.status, problem: plan.problem, caller, deadLettered: plan.deadLetters.length });
      return respond(plan.status, { error: plan.problem, deadLettered: plan.deadLetters.length });
    }
    let refusedBySqs: Array<{ envelope: Envelope; reason: string }>;
    try {
      refusedBySqs = await events.send(plan.envelopes);
    } catch (err) {
      logger.error('queueing failed', { error: String(err), events: plan.envelopes.length });
      return respond(503, {
        error: 'the events queue did not take every event; retry the request (events it took are deduplicated for five minutes)',
      });
    }
    const letters = [
      ...plan.deadLetters,
      ...refusedBySqs.map((r) => fitDeadLetter({ body: JSON.stringify(r.envelope), reason: r.reason })),
    ];
    try {
      for (const letter of letters) await deadLetter.send({ ...letter, source: 'ingest' });
    } catch (err) {
      logger.error('refused events could not be dead-lettered', { error: String(err), refused: letters.length });
      return respond(503, {
        error:
          'some events were refused and could not be recorded in the dead-letter queue; retry the request (events queued are deduplicated for five minutes)',
      });
    }
    const counts = { ...plan.counts, accepted: plan.counts.accepted - refusedBySqs.length, refused: letters.length };
    const problem = plan.problem ?? refusedBySqs[0]?.reason;
    if (letters.length > 0) logger.warn('events refused', { caller, problem, refused: letters.length });
    logger.info('queued', counts);
    return respond(202, { ...counts, ...(problem ? { problem, deadLettered: letters.length } : {}) });
  }).use(injectLambdaContext(logger));
}

export const handler = createIngestHandler(() => ingestDepsFromEnv());
