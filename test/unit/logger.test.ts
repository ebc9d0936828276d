// The local runtime's log lines (docs/operations/operating.md#reading-the-local-log): one short line per action through Powertools' custom log
// formatter, and Lambda's JSON everywhere else.
import { jest } from '@jest/globals';
import { functionLogger, humanLine } from '../../shared/lambda/logger.ts';

const at = new Date('2026-01-01T12:34:56.789Z');
const clock = at.toTimeString().slice(0, 8);
const base = { timestamp: at, logLevel: 'INFO' as const, serviceName: 'outrigger', message: '' };

describe('a human log line', () => {
  test('time, function, cluster, the object and the outcome, on one line', () => {
    expect(
      humanLine(
        { ...base, message: 'migration step' },
        {
          function: 'migrator',
          cluster: 'prod',
          migration: 'widgets.example.com-7d9f',
          outcome: 'Succeeded',
          rewritten: 5,
          detail: 'x\ny',
        },
        { color: false },
      ),
    ).toBe(`${clock} migrator prod widgets.example.com-7d9f migration step: Succeeded`);
    // A sync request's key names the cluster and the object; without an outcome field, the non-zero counts.
    expect(
      humanLine(
        { ...base, message: 'history synced' },
        {
          function: 'history',
          key: { cluster: 'local', kind: 'StatefulSet', namespace: 'default', name: 'web' },
          created: 1,
          truncated: 0,
          lambda_request_id: 'r',
        },
        { color: false },
      ),
    ).toBe(`${clock} history local StatefulSet default/web history synced: created=1`);
    expect(
      humanLine(
        { ...base, message: 'storage poll' },
        { function: 'storage-poll', cluster: 'local', reporter: 'apiserver', resources: 57, heartbeats: 57, created: 0, missedPolls: {} },
        { color: false },
      ),
    ).toBe(`${clock} storage-poll local apiserver storage poll: resources=57 heartbeats=57`);
    // An error says what failed, on the same one line however long or multi-line it was.
    const long = humanLine(
      { ...base, logLevel: 'ERROR', message: 'queueing failed' },
      { function: 'ingest', error: `boom\n${'x'.repeat(400)}` },
      { color: false },
    );
    expect(long).toMatch(new RegExp(`^${clock} ingest - - queueing failed: boom x+…$`));
    expect(long.length).toBeLessThanOrEqual(200);
  });

  test('coloured for a terminal (level, function, object), plain otherwise', () => {
    const attrs = [
      { ...base, logLevel: 'WARN' as const, message: 'cluster unreachable' },
      { function: 'heartbeat', cluster: 'prod', error: 'ECONNREFUSED' },
    ] as const;
    const plain = humanLine(...attrs, { color: false });
    const coloured = humanLine(...attrs, { color: true });
    expect(plain).not.toContain('\u001b[');
    expect(coloured).toContain('\u001b[');
    expect(coloured.replace(/\u001b\[[0-9;]*m/g, '')).toBe(plain);
  });
});

describe('a function logger', () => {
  const printed = (env: NodeJS.ProcessEnv) => {
    const out: string[] = [];
    const write = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => (out.push(String(chunk)), true));
    try {
      functionLogger('history', env).info('history synced', { parent: 'default/web', outcome: 'created revision 2' });
    } finally {
      write.mockRestore();
    }
    return out.join('');
  };

  test("prints Lambda's JSON unless the local runtime asks for lines (OUTRIGGER_LOG_FORMAT=text)", () => {
    expect(JSON.parse(printed({}))).toMatchObject({
      level: 'INFO',
      message: 'history synced',
      function: 'history',
      parent: 'default/web',
      service: 'outrigger',
    });
    expect(printed({ OUTRIGGER_LOG_FORMAT: 'text' })).toMatch(
      /^\d\d:\d\d:\d\d history - default\/web history synced: created revision 2\n$/,
    );
  });
});
