// The local runtime refuses, before it starts anything, the options it cannot keep together
// (docs/getting-started/local.md#one-namespace).
import { startRuntime } from '../../runtime/local.ts';

test('trust boundary: a runtime kept to one namespace refuses functions in containers, which it cannot keep there', async () => {
  await expect(startRuntime({ namespace: 'team-a', lambdaContainers: true, stateDir: '/nonexistent/outrigger-state' })).rejects.toThrow(
    '--namespace team-a cannot be kept by functions in their Lambda containers',
  );
});
