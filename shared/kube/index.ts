// Cluster access for Outrigger: the only module that talks to an apiserver.
export {
  KubeClient,
  RequestStats,
  serviceAccountUser,
  DEFAULT_FIELD_MANAGER,
  type EndpointSource,
  type KubeEndpoint,
  type TlsSettings,
  type KubeClientOptions,
} from './client.ts';
export type {
  KubeApi,
  Impersonation,
  ObjectRef,
  Stored,
  StoredMeta,
  CreateOptions,
  PatchOptions,
  WatchOptions,
  ListOptions,
  PatchType,
  WatchEvent,
  DeleteOptions,
} from './api.ts';
export { connect, type ClusterAccess } from './config.ts';
export { KubeError, isKubeError, kubeErrorFromResponse, unlessNotFound, type KubeErrorKind } from './errors.ts';
export { eksToken, eksTokenSource, stsHostname, EKS_TOKEN_PREFIX } from './eks-token.ts';
export {
  NotServedError,
  getResourceList,
  hasSubresource,
  isNamespaced,
  resolveKind,
  resolveResource,
  forgetDiscovery,
  discoverStorageVersions,
  servingVersion,
  type APIResource,
  type APIResourceList,
  type ResolvedResource,
  type StorageDiscovery,
  type StorageVersionEntry,
} from './discovery.ts';
export * from './resource.ts';
export { runWatchSource, type SourceEvent, type SourceEventType, type WatchSourceOptions } from './source.ts';
