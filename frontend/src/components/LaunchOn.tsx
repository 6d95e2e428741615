import { useCanWrite } from "../role";
import { Link } from "./Link";

/** An empty state's next step: launch a simulation on this population (operators only). */
export function LaunchOn({ populationId }: { populationId: number }) {
  const canWrite = useCanWrite();
  if (!canWrite) return null;
  return <Link href={`/simulations/new?population=${populationId}`}>Launch a simulation on this population</Link>;
}
