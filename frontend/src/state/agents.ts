// An agent is shown by its id everywhere (the one URLs, the API and exports use); its number in
// its population (1-based, what "Go to agent number" takes) is derived from it, never shown as
// a second id.

/** Agent ids are population_id · 2^32 + index (arithmetic: JS bit operators are 32-bit). */
export function agentNumber(agentId: number, populationId: number): number {
  return agentId - populationId * 2 ** 32 + 1;
}
