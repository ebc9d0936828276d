// `outrigger history <kind>/<name>` and `outrigger rollback <kind>/<name> --to-revision N`, also available
// as `kubectl outrigger ...`. They act as the kubeconfig's user: a rollback is the user's change to the
// parent, which the history controller then recognises as a rollback.
import { dump } from 'js-yaml';
import { createTwoFilesPatch } from 'diff';
import type { KubeClient, KubeObject } from '../shared/kube/index.ts';
import { Resources } from '../shared/kube/index.ts';
import { labelSelectorString, parentLabels, type Json, type JsonObject } from '../shared/history/data.ts';
import { matchesRevision, rollbackPatch, withoutDirectives } from '../shared/history/rollback.ts';
import { sortRevisions, type ControllerRevision } from '../shared/history/revisions.ts';
import { isOwnedBy } from '../shared/ownership/index.ts';
import { foreignHistory, foreignTable } from './foreign-history.ts';
import { resolveResourceArg, unambiguous, unreadNote, type ResolvedArg } from './resolve.ts';

export async function ownedHistory(
  kube: KubeClient,
  arg: string,
  namespace: string,
  resolved?: ResolvedArg,
): Promise<{ parent: KubeObject; revisions: ControllerRevision[]; kind: string; unread: string[] }> {
  const { resource, name, unread } = resolved ?? (await resolveResourceArg(kube, arg));
  const parent = await kube.get(resource, { name, namespace: resource.namespaced ? namespace : undefined });
  const listed = await kube.list<ControllerRevision>(Resources.controllerRevisions, {
    namespace: parent.metadata.namespace,
    labelSelector: labelSelectorString(parentLabels(parent)),
  });
  return { parent, revisions: sortRevisions(listed.items.filter((r) => isOwnedBy(r, parent))), kind: resource.kind, unread };
}

const yaml = (value: Json | undefined) => dump(withoutDirectives(value) ?? null, { sortKeys: true, lineWidth: 120, noRefs: true });

/** `-o json|yaml`, as kubectl takes it; without it, the table or text for people. */
export type Output = 'json' | 'yaml' | undefined;

export function parseOutput(value: string | undefined): Output {
  if (value === undefined || value === 'json' || value === 'yaml') return value;
  throw new Error(`-o takes json or yaml, got ${JSON.stringify(value)}`);
}

function render(output: 'json' | 'yaml', value: unknown): string {
  return output === 'json' ? `${JSON.stringify(value, null, 2)}\n` : dump(value, { sortKeys: true, lineWidth: 120, noRefs: true });
}

/** An age as kubectl prints one: 45s, 12m, 5h, 3d. */
export function age(since: string | undefined, now: Date): string {
  const seconds = Math.max(0, Math.floor((now.getTime() - Date.parse(since ?? '')) / 1000));
  if (!Number.isFinite(seconds)) return '<unknown>';
  if (seconds < 120) return `${seconds}s`;
  if (seconds < 180 * 60) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 48 * 3600) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86400)}d`;
}

/** The revision the parent holds now: the newest one it matches. */
function currentOf(revisions: readonly ControllerRevision[], parent: KubeObject): ControllerRevision | undefined {
  return [...revisions].reverse().find((r) => matchesRevision(r.data as Json | undefined, parent as unknown as JsonObject));
}

export async function historyCommand(
  kube: KubeClient,
  arg: string,
  namespace: string,
  opts: { revision?: number | undefined; output?: Output; now?: Date; warn?: (message: string) => void } = {},
): Promise<string> {
  const { parent, revisions, kind, unread } = await ownedHistory(kube, arg, namespace);
  // A read: shown, as kubectl shows it, with a word on the groups it could not search.
  if (unread.length)
    (opts.warn ?? ((m) => process.stderr.write(`warning: ${m}\n`)))(`searching for ${JSON.stringify(arg)}${unreadNote(unread)}`);
  const title = `${kind.toLowerCase()}/${parent.metadata.name}`;
  const current = currentOf(revisions, parent);
  const now = opts.now ?? new Date();
  const summary = (r: ControllerRevision) => ({
    revision: r.revision,
    name: r.metadata.name ?? '',
    created: r.metadata.creationTimestamp ?? '',
    changeCause: r.metadata.annotations?.['kubernetes.io/change-cause'] ?? null,
    current: r === current,
  });
  const revision = opts.revision;
  if (revision === undefined) {
    const foreign = await foreignHistory(kube, parent);
    if (opts.output)
      return render(opts.output, {
        kind,
        name: parent.metadata.name,
        namespace: parent.metadata.namespace ?? null,
        revisions: revisions.map(summary),
        ...(foreign.length ? { foreignRevisions: foreign.map(summary) } : {}),
      });
    const readOnly = foreignTable(foreign, (since) => age(since, now));
    if (revisions.length === 0)
      return `${title}: no revisions (is there a RevisionPolicy for ${kind}, or a CompositeController with rolling updates?)\n${readOnly}`;
    const rows = [
      ['REVISION', 'NAME', 'CURRENT', 'AGE', 'CHANGE-CAUSE'],
      ...revisions.map((r) => [
        String(r.revision),
        r.metadata.name ?? '',
        r === current ? '*' : '',
        age(r.metadata.creationTimestamp ?? undefined, now),
        r.metadata.annotations?.['kubernetes.io/change-cause'] ?? '<none>',
      ]),
    ];
    const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
    return `${title}\n${rows
      .map((row) =>
        row
          .map((c, i) => c.padEnd(widths[i]!))
          .join('  ')
          .trimEnd(),
      )
      .join('\n')}\n${readOnly}`;
  }
  const index = revisions.findIndex((r) => r.revision === revision);
  if (index < 0) throw new Error(`${title} has no revision ${revision} (it has ${revisions.map((r) => r.revision).join(', ') || 'none'})`);
  const shown = revisions[index]!;
  if (opts.output) return render(opts.output, { ...summary(shown), data: withoutDirectives(shown.data as Json | undefined) ?? null });
  const previous = revisions[index - 1];
  let out = `${title} revision ${revision} (${shown.metadata.name})${shown === current ? ', current' : ''}\n${yaml(shown.data)}`;
  if (previous) {
    out += `\n${createTwoFilesPatch(`revision ${previous.revision} (${previous.metadata.name})`, `revision ${revision} (${shown.metadata.name})`, yaml(previous.data), yaml(shown.data), undefined, undefined, { context: 3 })}`;
  }
  return out;
}

/**
 * Puts a revision's target state back: `toRevision`, or by default the previous one (the newest revision the
 * parent does not already hold, as `kubectl rollout undo` goes back one). Nothing is written when the parent
 * already matches it, or with `dryRun`, which shows the JSON patch it would send.
 */
export async function rollbackCommand(
  kube: KubeClient,
  arg: string,
  namespace: string,
  opts: { toRevision?: number | undefined; dryRun?: boolean; output?: Output } = {},
): Promise<string> {
  // A write: never to a resource that a group which did not answer may also be called.
  const resolved = unambiguous(await resolveResourceArg(kube, arg), arg);
  const { resource, name } = resolved;
  const { parent, revisions, kind } = await ownedHistory(kube, arg, namespace, resolved);
  const title = `${kind.toLowerCase()}/${name}`;
  const holds = (r: ControllerRevision) => matchesRevision(r.data as Json | undefined, parent as unknown as JsonObject);
  const target =
    opts.toRevision === undefined ? revisions.filter((r) => !holds(r)).at(-1) : revisions.find((r) => r.revision === opts.toRevision);
  if (!target) {
    if (opts.toRevision !== undefined)
      throw new Error(`${title} has no revision ${opts.toRevision} (it has ${revisions.map((r) => r.revision).join(', ') || 'none'})`);
    throw new Error(
      revisions.length
        ? `${title} holds its only revision's target state; there is no previous revision to go back to`
        : `${title} has no revisions (is there a RevisionPolicy for ${kind}, or a CompositeController with rolling updates?)`,
    );
  }
  const unchanged = holds(target);
  const patch = unchanged ? [] : rollbackPatch(target.data as Json | undefined, parent as unknown as JsonObject);
  if (!unchanged && !opts.dryRun) await kube.patch(resource, { name, namespace: parent.metadata.namespace }, patch, 'json');
  if (opts.output)
    return render(opts.output, {
      kind,
      name,
      namespace: parent.metadata.namespace ?? null,
      revision: target.revision,
      revisionName: target.metadata.name ?? '',
      changed: !unchanged && !opts.dryRun,
      dryRun: opts.dryRun === true,
      patch,
    });
  if (unchanged) return `${title} already matches revision ${target.revision} (${target.metadata.name}); nothing to do\n`;
  if (opts.dryRun)
    return `${title} would be rolled back to revision ${target.revision} (${target.metadata.name}) (dry run) with this JSON patch:\n${JSON.stringify(patch, null, 2)}\n`;
  return `${title} rolled back to revision ${target.revision} (${target.metadata.name})\n`;
}
