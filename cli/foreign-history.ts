// The history another controller keeps for a parent (kube-controller-manager's StatefulSet and DaemonSet
// controllers, LWS's; docs/controllers/history.md#coexistence), for `outrigger history` to show read-only: Outrigger never numbers,
// truncates or rolls back to these revisions.
import { Resources, parseApiVersion, type KubeClient, type KubeObject } from '../shared/kube/index.ts';
import { foreignRevisions, sortRevisions, type ControllerRevision } from '../shared/history/revisions.ts';

/** Found among the namespace's revisions by their ControllerRef, whatever their labels (LWS's match no selector of the parent's). */
export async function foreignHistory(kube: KubeClient, parent: KubeObject): Promise<ControllerRevision[]> {
  if (!parent.kind) return [];
  const listed = await kube.list<ControllerRevision>(Resources.controllerRevisions, { namespace: parent.metadata.namespace });
  return sortRevisions(
    foreignRevisions(listed.items, { group: parseApiVersion(parent.apiVersion ?? '').group, kind: parent.kind }, parent.metadata.uid),
  );
}

/** A table of them under a heading that says whose they are, or nothing. */
export function foreignTable(revisions: readonly ControllerRevision[], age: (since: string | undefined) => string): string {
  if (revisions.length === 0) return '';
  const rows = [
    ['REVISION', 'NAME', 'AGE'],
    ...revisions.map((r) => [String(r.revision), r.metadata.name ?? '', age(r.metadata.creationTimestamp ?? undefined)]),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  return `\nkept by another controller (read-only; Outrigger does not number, truncate or roll back to these):\n${rows
    .map((row) =>
      row
        .map((c, i) => c.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')}\n`;
}
