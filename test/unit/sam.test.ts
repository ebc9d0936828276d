// The `sam local invoke -t cdk.out/Outrigger.template.json --env-vars env.json --docker-network host Router` of
// docs/contributing/invoking-locally.md#with-docker-sam, as far as a machine without a container engine can take it
// (test/integration/sam-invoke.test.ts runs it in one): SAM CLI's
// own code (test/sam/resolve.py) finds every function by its construct id, and resolves its code directory, handler,
// layers and environment, as it would hand them to the Lambda container. The first run installs SAM CLI from PyPI
// into .cache/sam (see local/sam.ts).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { outriggerApp } from '../../infra/app.ts';
import { projectRoot } from '../../local/paths.ts';
import { samResolve } from '../../local/sam.ts';
import { samEnvironment } from '../../scripts/sam-env.ts';

test('sam local invoke finds every function by its construct id, with its bundle, the clusters layer and env.json applied', async () => {
  const outdir = await mkdtemp(join(tmpdir(), 'outrigger-sam-'));
  try {
    // As `cdk synth` writes it: with each resource's aws:cdk:path, which SAM reads function ids from, and with the
    // bundles (bundling is on by default), which SAM mounts as each function's code.
    const clusters = JSON.parse(readFileSync(join(projectRoot, 'test/unit/clusters.lint.json'), 'utf8')) as unknown;
    const { app, stack } = outriggerApp({ outdir, context: { 'aws:cdk:enable-path-metadata': true, 'outrigger:clusters': clusters } });
    app.synth();
    // As `npm run sam-env -- --queue-url-prefix ...` writes it for a local runtime on 127.0.0.1.
    const runtime = { kubeconfig: '/tmp/k/admin.kubeconfig', server: 'https://127.0.0.1:6443', dynamodb: 'http://127.0.0.1:8000', pid: 1 };
    const envFile = join(outdir, 'env.json');
    const prefix = 'https://sqs.eu-west-1.amazonaws.com/111122223333/Outrigger-';
    await writeFile(envFile, JSON.stringify(samEnvironment(runtime, '127.0.0.1', prefix)));

    const result = await samResolve(join(outdir, `${stack.stackName}.template.json`), envFile);
    expect(result.failures).toEqual([]);
    expect(result.code).toBe(0);
    // The command as docs/contributing/invoking-locally.md gives it: its template, and the function it names found
    // by its construct id with the values env.json gives it.
    const page = readFileSync(join(projectRoot, 'docs/contributing/invoking-locally.md'), 'utf8');
    const command = /^npm run sam -- local invoke -t (\S+) --env-vars env\.json --docker-network host --skip-pull-image (\w+) /m.exec(page);
    expect(command?.[1]).toBe(`cdk.out/${stack.stackName}.template.json`);
    const router = result.functions.find((f) => f.construct_id === command?.[2]);
    expect(router?.construct_id).toBe('Router');
    expect(router?.env).toMatchObject({ OUTRIGGER_QUEUE_URL_PREFIX: prefix, OUTRIGGER_DYNAMODB_ENDPOINT: 'http://127.0.0.1:8000' });
  } finally {
    await rm(outdir, { recursive: true, force: true });
  }
}, 300_000);
