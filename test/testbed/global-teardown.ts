import type { ContainerEngine } from '../../local/container-engine.ts';
import type { Testbed } from '../../local/testbed.ts';
import { stopBuildsAhead } from './builds-ahead.ts';

export default async function globalTeardown(): Promise<void> {
  stopBuildsAhead();
  await Promise.all([
    (globalThis as { __outriggerTestbed?: Testbed }).__outriggerTestbed?.stop(),
    (globalThis as { __outriggerEngine?: ContainerEngine }).__outriggerEngine?.release(),
  ]);
}
