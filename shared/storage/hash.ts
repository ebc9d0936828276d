// The apiserver's storage version hash (what discovery shows as storageVersionHash): the first 8 bytes of
// SHA-256 over "<group>/<version>/<kind>" of the storage version, in standard base64. Outrigger compares
// hashes from discovery only for equality; it computes one only to tie a CRD's storage version to the hash a
// migration was made for, before narrowing the CRD's status.storedVersions.
import { createHash } from 'node:crypto';

export function storageVersionHash(group: string, version: string, kind: string): string {
  return createHash('sha256').update(`${group}/${version}/${kind}`).digest().subarray(0, 8).toString('base64');
}
