// `outrigger forwarder-key`: the key one cluster's forwarder signs its envelopes with, for the operator to store as
// a Secret in the forwarder's namespace (docs/operations/forwarder.md#the-forwarder-key). Derived from the
// deployment's secret and the cluster's id, read from where the router reads it.
import { forwarderKey } from '../shared/envelope/signature.ts';

export const forwarderKeyUsage = `usage: outrigger forwarder-key --cluster ID [--secret-arn ARN | --secret-file FILE]

Prints the key (hex) that cluster ID's forwarder signs its envelopes with: HKDF-SHA256 of the deployment's
signing secret over "forwarder/<cluster>". Store it as the Secret the forwarder mounts (key \`key\`):

  kubectl -n outrigger-system create secret generic outrigger-forwarder-key \\
    --from-literal=key="$(outrigger forwarder-key --cluster ID)"

and restart the forwarder. The router takes the object of an envelope whose signature verifies for the parent's
state, and reads the parent for any other. The secret is the stack's MapHookSigningSecretArn (--secret-arn, read
with your AWS credentials) or a file (--secret-file); default: $OUTRIGGER_HOOK_SECRET_ARN or
$OUTRIGGER_HOOK_SECRET_FILE.
`;

export async function forwarderKeyCommand(opts: { cluster: string; secret: () => Promise<string> }): Promise<string> {
  return `${forwarderKey(await opts.secret(), opts.cluster)}\n`;
}
