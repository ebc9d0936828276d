// `kind/name` as kubectl takes it (statefulset/web, sts/web, statefulsets.apps/web, StatefulSet/web),
// resolved through discovery to a resource, so custom resources work like built-ins.
import { getResourceList, isKubeError, type KubeApi, type ResolvedResource } from '../shared/kube/index.ts';

interface GroupList {
  groups: Array<{ name: string; preferredVersion: { version: string } }>;
}

export interface ResolvedArg {
  resource: ResolvedResource;
  name: string;
  /**
   * The group versions searched whose discovery did not answer (an aggregated API whose backend is down answers
   * 503): skipped, as kubectl skips them, so one broken APIService does not stop every command.
   */
  unread: string[];
}

export async function resolveResourceArg(kube: KubeApi, arg: string): Promise<ResolvedArg> {
  const slash = arg.indexOf('/');
  if (slash <= 0 || slash === arg.length - 1)
    throw new Error(`expected <kind>/<name>, such as statefulset/web; got ${JSON.stringify(arg)}`);
  const kindPart = arg.slice(0, slash).toLowerCase();
  const name = arg.slice(slash + 1);
  const dot = kindPart.indexOf('.');
  const wanted = dot < 0 ? kindPart : kindPart.slice(0, dot);
  const group = dot < 0 ? undefined : kindPart.slice(dot + 1);
  const versions: Array<{ group: string; version: string }> = [{ group: '', version: 'v1' }];
  for (const g of (await kube.getPath<GroupList>('/apis')).groups) versions.push({ group: g.name, version: g.preferredVersion.version });
  const matches: ResolvedResource[] = [];
  const unread: string[] = [];
  for (const gv of versions) {
    if (group !== undefined && gv.group !== group) continue;
    const list = await getResourceList(kube, gv.group, gv.version).catch((err: unknown) => {
      // Removed since /apis listed it (an APIService or CRD deleted meanwhile): it serves nothing to find.
      if (isKubeError(err, 'NotFound')) return undefined;
      if (!isKubeError(err, 'Transient')) throw err;
      unread.push(gv.group ? `${gv.group}/${gv.version}` : gv.version);
      return undefined;
    });
    if (!list) continue;
    const found = list.resources.find(
      (r) =>
        !r.name.includes('/') &&
        (r.name === wanted || r.singularName === wanted || r.kind.toLowerCase() === wanted || (r.shortNames ?? []).includes(wanted)),
    );
    if (found) matches.push({ group: gv.group, version: gv.version, resource: found.name, kind: found.kind, namespaced: found.namespaced });
    // A built-in resource wins, as with kubectl (statefulset is apps' whatever a CRD calls itself).
    if (found && builtIn(gv.group)) break;
  }
  const [first] = matches;
  if (!first) throw new Error(`the cluster serves no resource called ${JSON.stringify(kindPart)}${unreadNote(unread)}`);
  // Two custom resources of one name: a rollback must never write to the other one.
  if (!builtIn(first.group) && matches.length > 1) {
    throw new Error(
      `${JSON.stringify(kindPart)} is served by ${matches.map((m) => `${m.resource}.${m.group}`).join(' and ')}; name one as <resource>.<group>/${name}`,
    );
  }
  return { resource: first, name, unread };
}

/**
 * For a write: refuses a custom resource found while some group versions did not answer, one of which may serve
 * another resource of that name (a built-in one wins whatever the others serve). Naming the group reads no other.
 */
export function unambiguous(resolved: ResolvedArg, arg: string): ResolvedArg {
  const { resource, name, unread } = resolved;
  if (builtIn(resource.group) || !unread.length) return resolved;
  throw new Error(
    `${JSON.stringify(arg)} resolved to ${resource.resource}.${resource.group}, but${unreadNote(unread).slice(1)}, and may serve another resource of that name; name it as ${resource.resource}.${resource.group}/${name}`,
  );
}

/** What a failed search says of the group versions it could not read. */
export function unreadNote(unread: readonly string[]): string {
  return unread.length ? `; ${unread.join(', ')} did not answer discovery (an aggregated API whose backend is down?)` : '';
}

/** Kubernetes' own groups: the core group, the unqualified ones (apps, batch) and *.k8s.io. */
function builtIn(group: string): boolean {
  return !group.includes('.') || group.endsWith('.k8s.io');
}
