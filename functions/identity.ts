// Acting as a ServiceAccount a definition names (docs/operations/security.md#serviceaccounts-a-definition-names): a
// MapController's reads and writes, and a RevisionPolicy's reads of its target kinds, go through that account's
// grants, never Outrigger's own. Outrigger acts as an account only where a cluster admin allowed it (`get` and
// `impersonate` on that ServiceAccount) and where the account itself names the definition (its
// outrigger.dev/allowed-controllers annotation), so one author cannot borrow what was granted for another's controller.
import {
  gvr,
  isKubeError,
  Resources,
  serviceAccountUser,
  type KubeApi,
  type KubeClient,
  type KubeObject,
  type ResolvedResource,
} from '../shared/kube/index.ts';
import { ALLOWED_CONTROLLERS_ANNOTATION, accountConsents, consumerRef, type Consumer } from '../shared/identity.ts';

export interface ServiceAccountRef {
  namespace: string;
  name: string;
}

/** Why Outrigger may not act as the account, or what the account may not do: a condition's reason and message. */
export class IdentityProblem extends Error {
  readonly reason: 'ServiceAccountNotFound' | 'ServiceAccountNotAllowed' | 'ServiceAccountNotConsenting' | 'Forbidden';
  constructor(reason: IdentityProblem['reason'], message: string) {
    super(message);
    this.name = 'IdentityProblem';
    this.reason = reason;
  }
}

export function actingAs(kube: KubeClient, account: ServiceAccountRef): KubeClient;
export function actingAs(kube: KubeApi, account: ServiceAccountRef): KubeApi;
export function actingAs(kube: KubeApi, account: ServiceAccountRef): KubeApi {
  return kube.as(serviceAccountUser(account.namespace, account.name));
}

const selfAccessReviews = gvr('authorization.k8s.io', 'v1', 'selfsubjectaccessreviews');

/** `pods` or `statefulsets.apps`, as kubectl names a resource. */
export function resourceName(r: Pick<ResolvedResource, 'group' | 'resource'>): string {
  return `${r.resource}${r.group ? `.${r.group}` : ''}`;
}

const notAllowed = (who: string) =>
  new IdentityProblem('ServiceAccountNotAllowed', `a cluster admin has not allowed Outrigger to act as ${who}`);

/**
 * Throws an IdentityProblem unless the account exists, Outrigger may read it, and it names `consumer` in its
 * outrigger.dev/allowed-controllers annotation. Read as Outrigger itself, before anything is done as the account.
 */
export async function checkConsent(kube: KubeApi, account: ServiceAccountRef, consumer: Consumer): Promise<void> {
  const who = `ServiceAccount ${account.namespace}/${account.name}`;
  let sa;
  try {
    sa = await kube.get(Resources.serviceAccounts, { name: account.name, namespace: account.namespace });
  } catch (err) {
    if (isKubeError(err, 'NotFound')) throw new IdentityProblem('ServiceAccountNotFound', `${who} does not exist`);
    if (isKubeError(err, 'Forbidden')) throw notAllowed(who);
    throw err;
  }
  if (!accountConsents(sa.metadata.annotations ?? undefined, consumer))
    throw new IdentityProblem(
      'ServiceAccountNotConsenting',
      `${who} does not name ${consumerRef(consumer)} in its ${ALLOWED_CONTROLLERS_ANNOTATION} annotation, so Outrigger does not act as it for this ${consumer.kind}`,
    );
}

/**
 * Whether Outrigger may act as `account` for `consumer` (checkConsent), and which of `needs` (a verb on a
 * resource, in every namespace) the account may not do. Throws an IdentityProblem when it may not act as the
 * account; answers the needs refused (none: all allowed).
 */
export async function refusedNeeds(
  kube: KubeApi,
  account: ServiceAccountRef,
  consumer: Consumer,
  needs: ReadonlyArray<{ resource: ResolvedResource; verb: string }>,
): Promise<Array<{ resource: ResolvedResource; verb: string }>> {
  const who = `ServiceAccount ${account.namespace}/${account.name}`;
  await checkConsent(kube, account, consumer);
  const allowed = async ({ resource, verb }: { resource: ResolvedResource; verb: string }): Promise<boolean> => {
    try {
      const review = await actingAs(kube, account).create(selfAccessReviews, {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SelfSubjectAccessReview',
        metadata: {},
        spec: { resourceAttributes: { group: resource.group, resource: resource.resource, verb } },
      } as KubeObject);
      return (review.status as { allowed?: boolean } | undefined)?.allowed === true;
    } catch (err) {
      // Impersonation itself refused: get was granted, impersonate was not.
      if (isKubeError(err, 'Forbidden')) throw notAllowed(who);
      throw err;
    }
  };
  const verdicts = await Promise.all(needs.map(async (n) => ({ n, ok: await allowed(n) })));
  return verdicts.filter((v) => !v.ok).map((v) => v.n);
}
