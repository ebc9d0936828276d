// `outrigger history <kind>/<name>` and `outrigger rollback <kind>/<name> --to-revision N`, also available
// as `kubectl outrigger ...`. They act as the kubeconfig's user: a rollback is the user's change to the
// parent, which the history controller then recognises as a rollback.
import { dump } from 'js-yaml';
import { createTwoFilesPatch } from 'diff';
import type { KubeClient, KubeObject } from '../shared/kube/index.ts';
import { Resources } from '../shared/kube/index.ts';
import { labelSelectorString, parentLabels, type Json, type JsonObject } from '../shared/history/data.ts';
import { rollbackPatch, withoutDirectives } from '../shared/history/rollback.ts';
import { sortRevisions, type ControllerRevision } from '../shared/history/revisions.ts';
import { isControlledBy } from '../shared/ownership/index.ts';
import { resolveResourceArg } from './resolve.ts';

export async function ownedHistory(kube: KubeClient, arg: string, namespace: string): Promise<{ parent: KubeObject; revisions: ControllerRevision[]; kind: string }> {
  const { resource, name } = await resolveResourceArg(kube, arg);
  const parent = await kube.get(resource, name, resource.namespaced ? namespace : undefined);
  const listed = await kube.list<ControllerRevision>(Resources.controllerRevisions, { namespace: parent.metadata.namespace, labelSelector: labelSelectorString(parentLabels(parent)) });
  return { parent, revisions: sortRevisions(listed.items.filter((r) => isControlledBy(r, parent))), kind: resource.kind };
}

const yaml = (value: Json | undefined) => dump(withoutDirectives(value) ?? null, { sortKeys: true, lineWidth: 120, noRefs: true });

export async function historyCommand(kube: KubeClient, arg: string, namespace: string, revision?: number): Promise<string> {
  const { parent, revisions, kind } = await ownedHistory(kube, arg, namespace);
  const title = `${kind.toLowerCase()}/${parent.metadata.name}`;
  if (revision === undefined) {
    if (revisions.length === 0) return `${title}: no revisions (is there a RevisionPolicy for ${kind}?)\n`;
    const rows = [['REVISION', 'NAME', 'CREATED', 'CHANGE-CAUSE'], ...revisions.map((r) => [String(r.revision), r.metadata.name ?? '', r.metadata.creationTimestamp ?? '', r.metadata.annotations?.['kubernetes.io/change-cause'] ?? '<none>'])];
    const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
    return `${title}\n${rows.map((row) => row.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd()).join('\n')}\n`;
  }
  const index = revisions.findIndex((r) => r.revision === revision);
  if (index < 0) throw new Error(`${title} has no revision ${revision} (it has ${revisions.map((r) => r.revision).join(', ') || 'none'})`);
  const current = revisions[index]!;
  const previous = revisions[index - 1];
  let out = `${title} revision ${revision} (${current.metadata.name})\n${yaml(current.data)}`;
  if (previous) {
    out += `\n${createTwoFilesPatch(`revision ${previous.revision} (${previous.metadata.name})`, `revision ${revision} (${current.metadata.name})`, yaml(previous.data), yaml(current.data), undefined, undefined, { context: 3 })}`;
  }
  return out;
}

export async function rollbackCommand(kube: KubeClient, arg: string, namespace: string, toRevision: number): Promise<string> {
  const { resource, name } = await resolveResourceArg(kube, arg);
  const { parent, revisions, kind } = await ownedHistory(kube, arg, namespace);
  const target = revisions.find((r) => r.revision === toRevision);
  if (!target) throw new Error(`${kind.toLowerCase()}/${name} has no revision ${toRevision} (it has ${revisions.map((r) => r.revision).join(', ') || 'none'})`);
  await kube.patch(resource, name, parent.metadata.namespace, rollbackPatch(target.data, parent as unknown as JsonObject), 'json');
  return `${kind.toLowerCase()}/${name} rolled back to revision ${toRevision} (${target.metadata.name})\n`;
}
