// A rolling pass's I/O (docs/controllers/compositecontroller.md#rolling-updates): the parent's revisions listed and,
// for a new state of its revisioned fields, one created (the history core's createRevision); the sync hook asked once
// per revision a child still belongs to; the rollout decided in shared/composite/rollout.ts; revisions no child
// belongs to truncated after the children are written.
import type { HookCaller } from '../../shared/hooks/index.ts';
import { isKubeError, KubeError, Resources, type KubeApi, type KubeObject } from '../../shared/kube/index.ts';
import { parseCompositeAnswer, type SyncAnswer } from '../../shared/composite/api.ts';
import { prepareChildren } from '../../shared/composite/plan.ts';
import {
  latestRevision,
  parentAt,
  parentRevisions,
  planRollout,
  revisionData,
  revisionsToAsk,
  revisionsToDelete,
} from '../../shared/composite/rollout.ts';
import { labelSelectorString, parentLabels } from '../../shared/history/data.ts';
import { maxRevision, type ControllerRevision } from '../../shared/history/revisions.ts';
import { setCondition, type Condition } from '../../shared/metacontroller/conditions.ts';
import { createRevision } from '../../shared/history/create-revision.ts';
import type { ResolvedComposite } from './controllers.ts';

export interface RollingAnswer {
  /** The latest revision's answer, its status with the `Updated` condition. */
  answer: SyncAnswer;
  /** The children to write. */
  desired: KubeObject[];
  /** Children (identities) written in place whatever their method: only their revision label changes. */
  inPlace: ReadonlySet<string>;
  hookCalls: number;
  /** Deletes the revisions no child belongs to beyond the kept number; called once the children are written. */
  truncate: () => Promise<void>;
}

/**
 * The hook asked for the parent at each revision its children belong to (the latest: the parent as it is), and
 * the rollout's children. `request` is the latest revision's hook request; the others differ by `parent` only.
 */
export async function rollingAnswer(
  ctx: { kube: KubeApi; hooks: HookCaller; call: Parameters<HookCaller['call']>[2]; strict?: boolean },
  d: ResolvedComposite,
  parent: KubeObject,
  observed: KubeObject[],
  request: object,
): Promise<RollingAnswer> {
  const paths = d.parent.revisionFieldPaths;
  const namespace = parent.metadata.namespace!;
  const listed = await forbiddenAs('list', () =>
    ctx.kube.listAll<ControllerRevision>(Resources.controllerRevisions, {
      namespace,
      labelSelector: labelSelectorString(parentLabels(parent)),
    }),
  );
  const revisions = parentRevisions(parent, listed);
  const data = revisionData(parent, paths);
  const latest =
    latestRevision(revisions, data) ??
    (await forbiddenAs('create', () => createRevision(ctx.kube, d.parentResource, parent, { data, number: maxRevision(revisions) + 1 })));
  const all = revisions.some((r) => r.metadata.uid === latest.metadata.uid) ? revisions : [...revisions, latest];
  const asked = [latest, ...revisionsToAsk(all, latest.metadata.name!, observed, d.kinds)];
  const answers = new Map<string, KubeObject[]>();
  let answer: SyncAnswer | undefined;
  let resyncAfterSeconds: number | undefined;
  for (const r of asked) {
    const at = r === latest ? parent : parentAt(parent, r.data, paths);
    const answered = await ctx.hooks.call(d.hooks.sync, { ...request, parent: at }, ctx.call);
    const parsed = parseCompositeAnswer(answered, ctx.strict);
    answer ??= parsed;
    // The soonest any revision asks for, as one answer's.
    if (parsed.resyncAfterSeconds !== undefined) resyncAfterSeconds = Math.min(resyncAfterSeconds ?? Infinity, parsed.resyncAfterSeconds);
    answers.set(r.metadata.name!, prepareChildren(parsed.children, { parent, kinds: d.kinds, generateSelector: d.generateSelector }));
  }
  const plan = planRollout({ latest: latest.metadata.name!, answers, observed, kinds: d.kinds });
  const base = (answer!.status ?? parent.status ?? {}) as { conditions?: Condition[] };
  const status = { ...base, conditions: setCondition(base.conditions, { type: 'Updated', ...plan.updated }, new Date()) };
  return {
    answer: { ...answer!, status, resyncAfterSeconds },
    desired: plan.desired,
    inPlace: plan.relabel,
    hookCalls: asked.length,
    truncate: async () => {
      for (const r of revisionsToDelete(all, plan.live)) {
        try {
          await ctx.kube.delete(
            Resources.controllerRevisions,
            { name: r.metadata.name!, namespace },
            { preconditions: { uid: r.metadata.uid! } },
          );
        } catch (err) {
          if (!isKubeError(err, 'NotFound') && !isKubeError(err, 'Conflict')) throw err;
        }
      }
    },
  };
}

/** A revision read or write the ServiceAccount may not make: the parent's Forbidden problem, naming the grant. */
async function forbiddenAs<T>(verb: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (!isKubeError(err, 'Forbidden')) throw err;
    throw new KubeError(
      'Forbidden',
      `the controller's ServiceAccount may not ${verb} controllerrevisions.apps (rolling updates keep the parent's revisions)`,
    );
  }
}
