// The bed bench/peer measures on: one kube-apiserver of the test bed's build on its embedded etcd, with an audit
// log of every request (each peer's requests are read from it), and the CPU time of the bed's processes.
import { open, readFile, readdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ensureTestClusterBinary, startControlPlane, type ControlPlane } from '../local/apiserver.ts';
import type { Log } from '../local/process.ts';

/** One audit event per request, when its response is complete (a watch's too, when it ends). */
const AUDIT_POLICY =
  'apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived, ResponseStarted]\nrules: [{level: Metadata}]\n';
export interface AuditEvent {
  verb: string;
  requestURI: string;
  user: { username: string };
  userAgent?: string;
  objectRef?: { resource?: string; subresource?: string; namespace?: string };
  /** RFC 3339 with microseconds: when the request arrived, and when its response was complete. */
  requestReceivedTimestamp: string;
  stageTimestamp: string;
}
const CLOCK_TICKS_PER_SECOND = 100; // USER_HZ on Linux

export interface AuditedBed {
  cp: ControlPlane;
  /** The test bed's binary: kube-controller-manager is one of its commands. */
  binary: string;
  dir: string;
  /** The audit events written since `offset`, and the offset after them. */
  auditSince(offset: number): Promise<{ events: AuditEvent[]; end: number }>;
  auditEnd(): Promise<number>;
  /** Waits until the audit log has not grown for `quietMs` (every answered request is in it), or `maxMs` passed. */
  auditQuiet(quietMs: number, maxMs?: number): Promise<void>;
  /** CPU seconds of the bed's processes (etcd is embedded in the bed's own process; each apiserver is its child). */
  bedCpuSeconds(): Promise<number>;
}

export async function startAuditedBed(dir: string, log: Log): Promise<AuditedBed> {
  const auditLog = join(dir, 'audit.log');
  await writeFile(join(dir, 'audit-policy.yaml'), AUDIT_POLICY);
  const binary = await ensureTestClusterBinary(log);
  const cp = await startControlPlane({
    apiservers: 1,
    apiserverFlags: [`--audit-policy-file=${join(dir, 'audit-policy.yaml')}`, `--audit-log-path=${auditLog}`, '--audit-log-maxsize=0'],
    log,
  });
  const auditSince = async (offset: number) => {
    const size = (await stat(auditLog)).size;
    const file = await open(auditLog, 'r');
    try {
      const buf = Buffer.alloc(size - offset);
      await file.read(buf, 0, buf.length, offset);
      const text = buf.toString('utf8');
      const complete = text.lastIndexOf('\n') + 1;
      return {
        events: text
          .slice(0, complete)
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as AuditEvent),
        end: offset + Buffer.byteLength(text.slice(0, complete)),
      };
    } finally {
      await file.close();
    }
  };
  const auditEnd = async () => (await stat(auditLog)).size;
  const auditQuiet = async (quietMs: number, maxMs = Infinity) => {
    let last = await auditEnd();
    for (let quiet = 0, waited = 0; quiet < quietMs && waited < maxMs; waited += 50) {
      await sleep(50);
      const now = await auditEnd();
      quiet = now === last ? quiet + 50 : 0;
      last = now;
    }
  };
  return {
    cp,
    binary,
    dir,
    auditSince,
    auditEnd,
    auditQuiet,
    bedCpuSeconds: async () => (await processTreeTicks(cp.pid)) / CLOCK_TICKS_PER_SECOND,
  };
}

/** CPU seconds of one process alone (its own threads), 0 once it has exited. */
export async function processCpuSeconds(pid: number): Promise<number> {
  return (await ownTicks(pid)) / CLOCK_TICKS_PER_SECOND;
}

async function ownTicks(pid: number): Promise<number> {
  try {
    const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
    return Number(fields[11]) + Number(fields[12]); // utime, stime
  } catch {
    return 0; // exited meanwhile
  }
}

async function processTreeTicks(pid: number): Promise<number> {
  let ticks = await ownTicks(pid);
  try {
    for (const task of await readdir(`/proc/${pid}/task`)) {
      const children = (await readFile(`/proc/${pid}/task/${task}/children`, 'utf8')).trim();
      for (const c of children ? children.split(' ') : []) ticks += await processTreeTicks(Number(c));
    }
  } catch {
    // exited meanwhile
  }
  return ticks;
}

/** What an audit event's request was: its verb and resource (`update storagestates/status`), or `get discovery`. */
export const requestKind = (e: AuditEvent) =>
  e.objectRef?.resource
    ? `${e.verb} ${e.objectRef.resource}${e.objectRef.subresource ? `/${e.objectRef.subresource}` : ''}`
    : `${e.verb} ${/^\/apis?(\/|$|\?)/.test(e.requestURI) ? 'discovery' : e.requestURI.split('?')[0]}`;

/** Milliseconds since the epoch, the audit timestamp's microseconds kept as the fraction. */
export const auditTime = (t: string) => {
  const [whole, fraction = '0'] = t.replace(/Z$/, '').split('.');
  return Date.parse(`${whole}Z`) + Number(`0.${fraction}`) * 1000;
};

export const round = (x: number, d = 1) => Number(x.toFixed(d));
/** a / b, rounded; 1 when both are 0, null when only b is. */
export const ratio = (a: number, b: number) => (b === 0 ? (a === 0 ? 1 : null) : round(a / b, 2));

/** How many of the events were requests of each kind. */
export function countByKind(events: readonly AuditEvent[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const e of events) out[requestKind(e)] = (out[requestKind(e)] ?? 0) + 1;
  return out;
}
