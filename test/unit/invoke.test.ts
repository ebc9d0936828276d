// `npm run invoke` without a cluster: the sample events are what the functions receive in AWS, the bundles it
// runs are byte for byte the ones the stack deploys, and a missing environment is named before anything runs.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import type { CfnFunction } from 'aws-cdk-lib/aws-lambda';
import type { SQSEvent } from 'aws-lambda';
import { functions } from '../../functions/index.ts';
import { OutriggerStack } from '../../infra/stack.ts';
import { eksCluster } from './clusters.ts';
import { projectRoot } from '../../local/paths.ts';
import { BUNDLE_FILE, bundleFunction } from '../../scripts/bundle.ts';
import { deduplicationId, messageGroupId, parseEnvelope } from '../../shared/envelope/index.ts';
import { MalformedMessageError } from '../../shared/validation.ts';
import { EVENTS_QUEUE, queueName } from '../../shared/lambda/queues.ts';
import { parseSyncRequest, syncGroupId } from '../../shared/lambda/sync-request.ts';
import { syncDeduplicationId } from '../../shared/lambda/sync-sink.ts';

const eventsDir = join(projectRoot, 'events');
const samples = readdirSync(eventsDir).filter((f) => f.endsWith('.json'));
const names = functions.map((f) => f.name);

/** events/<function>.json or events/<function>-<variant>.json; the longest name wins (map-resync over map). */
function functionOf(file: string): string | undefined {
  const base = file.replace(/\.json$/, '');
  return names.filter((n) => base === n || base.startsWith(`${n}-`)).sort((a, b) => b.length - a.length)[0];
}

const read = (file: string): unknown => JSON.parse(readFileSync(join(eventsDir, file), 'utf8'));
const md5 = (s: string) => createHash('md5').update(s).digest('hex');

describe('the sample events', () => {
  test.each(samples)('%s is JSON and names a registered function', (file) => {
    expect(() => read(file)).not.toThrow();
    expect(functionOf(file)).toBeDefined();
  });

  test('cover every function a queue or a schedule triggers', () => {
    const triggered = functions.filter((f) => f.events || f.sync || f.schedule).map((f) => f.name);
    expect(triggered.filter((n) => !samples.includes(`${n}.json`))).toEqual([]);
  });

  const sqsSamples = samples.filter((f) => {
    const spec = functions.find((s) => s.name === functionOf(f));
    return spec?.events || spec?.sync;
  });

  test.each(sqsSamples)("%s is an SQS FIFO batch as Lambda delivers it, from cluster local's queue of a stack named Outrigger", (file) => {
    const event = read(file) as SQSEvent;
    const spec = functions.find((s) => s.name === functionOf(file))!;
    const queue = `Outrigger-${queueName('local', spec.events ? EVENTS_QUEUE : spec.sync!.target)}`;
    expect(event.Records.length).toBeGreaterThan(0);
    for (const r of event.Records) {
      expect(r).toMatchObject({ eventSource: 'aws:sqs', awsRegion: 'us-east-1', md5OfBody: md5(r.body) });
      expect(r.eventSourceARN).toBe(`arn:aws:sqs:us-east-1:000000000000:${queue}`);
      expect(Object.keys(r.attributes).sort()).toEqual([
        'ApproximateFirstReceiveTimestamp',
        'ApproximateReceiveCount',
        'MessageDeduplicationId',
        'MessageGroupId',
        'SenderId',
        'SentTimestamp',
        'SequenceNumber',
      ]);
    }
  });

  /** Each record's body parsed as its consumer parses it, or the malformed-message error it gets. */
  function parsed(file: string) {
    const spec = functions.find((s) => s.name === functionOf(file))!;
    return (read(file) as SQSEvent).Records.map((r) => {
      try {
        if (spec.events) {
          const envelope = parseEnvelope(r.body);
          return {
            r,
            ok: true as const,
            cluster: envelope.cluster,
            group: messageGroupId(envelope),
            dedup: deduplicationId(envelope, 'forwarder'),
          };
        }
        const request = parseSyncRequest(r.body);
        return { r, ok: true as const, cluster: request.key.cluster, group: syncGroupId(request.key), dedup: syncDeduplicationId(request) };
      } catch (err) {
        if (!(err instanceof MalformedMessageError)) throw err;
        return { r, ok: false as const };
      }
    });
  }

  test.each(sqsSamples)(
    '%s carries what its consumer reads, for cluster local, with the group and deduplication ids its sender gives',
    (file) => {
      const records = parsed(file);
      const malformed = records.filter((p) => !p.ok);
      if (file.endsWith('-malformed.json')) expect(malformed.length).toBeGreaterThan(0);
      else if (file === 'router.json') expect(malformed).toHaveLength(1);
      else expect(malformed).toEqual([]);
      for (const p of records) {
        if (!p.ok) continue;
        expect(p.cluster).toBe('local');
        expect(p.r.attributes.MessageGroupId).toBe(p.group);
        expect(p.r.attributes.MessageDeduplicationId).toBe(p.dedup);
      }
    },
  );

  test("the scheduled functions get EventBridge scheduled events; storage-poll also the stack's per-reporter input", () => {
    for (const name of functions.filter((f) => f.schedule).map((f) => f.name)) {
      const file = name === 'storage-poll' ? 'storage-poll-scheduled.json' : `${name}.json`;
      expect(read(file)).toMatchObject({
        version: '0',
        'detail-type': 'Scheduled Event',
        source: 'aws.events',
        account: '000000000000',
        detail: {},
      });
    }
    expect(read('storage-poll.json')).toEqual({ cluster: 'local', reporter: 'apiserver' });
  });
});

describe('the bundles npm run invoke and bench:bundle build', () => {
  test('are the bytes the stack deploys, for every function, without what Lambda never needs', async () => {
    const app = new App({ outdir: mkdtempSync(join(tmpdir(), 'outrigger-synth-')) });
    const stack = new OutriggerStack(app, 'Invoke', { clusters: [eksCluster('prod')] });
    const assembly = app.synth();
    const ours = mkdtempSync(join(tmpdir(), 'outrigger-bundles-'));
    const bundles = await Promise.all(functions.map((spec) => bundleFunction(spec, join(ours, spec.name))));
    const compared = functions.map((spec, i) => {
      const code = stack.resolve((stack.outrigger.functions.get(spec.name)!.node.defaultChild as CfnFunction).code) as { s3Key: string };
      const deployed = readFileSync(join(assembly.directory, `asset.${code.s3Key.replace(/\.zip$/, '')}`, BUNDLE_FILE));
      return { name: spec.name, same: readFileSync(bundles[i]!.file).equals(deployed) };
    });
    expect(compared).toEqual(functions.map((spec) => ({ name: spec.name, same: true })));
    // What a cold start must not parse (scripts/bundle.ts EXTERNALS and ALIASES; shared/kube/apply.ts).
    const unwanted =
      /node_modules\/(@kubernetes\/client-node|js-yaml|@aws-sdk\/nested-clients|@aws-sdk\/credential-provider-(?!env)[a-z-]+)\//;
    const carried = bundles.map((b, i) => ({
      name: functions[i]!.name,
      unwanted: Object.keys(b.metafile.inputs).filter((path) => unwanted.test(path)),
    }));
    expect(carried).toEqual(functions.map((spec) => ({ name: spec.name, unwanted: [] })));
  }, 240_000);
});

describe('npm run invoke', () => {
  test('names what is missing when neither the environment nor a local runtime has it, before building anything', () => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OUTRIGGER_')));
    const out = spawnSync(join(projectRoot, 'node_modules/node/bin/node'), ['scripts/invoke.ts', 'heartbeat', '--no-runtime'], {
      cwd: projectRoot,
      env,
      encoding: 'utf8',
    });
    expect(out.status).toBe(2);
    expect(out.stdout).toBe('');
    expect(out.stderr).toContain('OUTRIGGER_CLUSTERS (or OUTRIGGER_CLUSTERS_FILE) and OUTRIGGER_TABLE are not set');
    expect(out.stderr).not.toContain('bundled');
  });

  test('reads the cluster configuration from OUTRIGGER_CLUSTERS_FILE as a deployed function does, naming the file it cannot read', () => {
    const env = {
      ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OUTRIGGER_'))),
      OUTRIGGER_CLUSTERS_FILE: '/nonexistent/clusters.json',
      OUTRIGGER_TABLE: 'outrigger',
    };
    const out = spawnSync(join(projectRoot, 'node_modules/node/bin/node'), ['scripts/invoke.ts', 'heartbeat', '--no-runtime'], {
      cwd: projectRoot,
      env,
      encoding: 'utf8',
    });
    expect(out.status).toBe(2);
    expect(out.stderr).toContain('OUTRIGGER_CLUSTERS_FILE /nonexistent/clusters.json: cannot read it');
    expect(out.stderr).not.toContain('bundled');
  });

  test('refuses a function the registry does not have, listing those it has', () => {
    const out = spawnSync(join(projectRoot, 'node_modules/node/bin/node'), ['scripts/invoke.ts', 'no-such-function'], {
      cwd: projectRoot,
      encoding: 'utf8',
    });
    expect(out.status).toBe(2);
    expect(out.stderr).toContain(`functions: ${names.join(', ')}`);
  });
});
