import { createContext, useContext } from "react";
import type { ApiInfo } from "./api/types";

/** What the signed-in token may do: the operator's API token everything, a viewer token only read. */
export type Role = "operator" | "viewer";

/**
 * The role from GET /api/info. Until the manager has answered we show no actions (a viewer must
 * not see buttons flash); a manager too old to say is an operator-only one.
 */
export function roleOf(info: ApiInfo | null): Role {
  if (info === null) return "viewer";
  return info.role ?? "operator";
}

export const RoleContext = createContext<Role>("operator");

/** Whether the page may offer actions that change something (launch, delete, drain, ...). */
export function useCanWrite(): boolean {
  return useContext(RoleContext) === "operator";
}
