// `outrigger hook-key`: the key one MapController's webhook requests are signed with, for its receiver's operator
// (docs/reference/hooks.md#signatures). The key is derived from the deployment's secret and the controller's
// cluster and uid, so the command reads the uid from the cluster and the secret from where the map function does.
import { controllerKey } from '../shared/hooks/signature.ts';
import type { KubeApi } from '../shared/kube/index.ts';
import { mapControllers } from '../functions/map/controllers.ts';

// bin/outrigger.ts reads the secret as the map function does.
export { signingSecret } from '../functions/metacontroller/environment.ts';

export const hookKeyUsage = `usage: outrigger hook-key <MapController> [--cluster ID] [--secret-arn ARN | --secret-file FILE] [--uid UID] [--kubeconfig PATH] [--context NAME]

Prints the key (hex) that the named MapController's webhook requests are signed with, for the operator of its
receiver: HKDF-SHA256 of the deployment's signing secret over "<cluster>/<MapController uid>". --cluster is the
cluster's id in clusters.json (default: local, as in \`outrigger run\`). The secret is the stack's
MapHookSigningSecretArn (--secret-arn, read with your AWS credentials) or a file (--secret-file); default:
$OUTRIGGER_HOOK_SECRET_ARN or $OUTRIGGER_HOOK_SECRET_FILE. The uid is read from the cluster unless --uid gives it.
A MapController deleted and created again has a new uid, so a new key.
`;

export interface HookKeyOptions {
  name: string;
  cluster: string;
  /** Read from the cluster when not given. */
  uid?: string | undefined;
  secret: () => Promise<string>;
}

export async function hookKeyCommand(kube: KubeApi | undefined, opts: HookKeyOptions): Promise<string> {
  let uid = opts.uid;
  if (!uid) {
    if (!kube) throw new Error('hook-key needs the MapController uid: a cluster to read it from, or --uid');
    uid = (await kube.get(mapControllers, { name: opts.name })).metadata.uid;
    if (!uid) throw new Error(`MapController ${opts.name} has no uid`);
  }
  return `${controllerKey(await opts.secret(), opts.cluster, uid)}\n`;
}
