import { describe, expect, it } from "vitest";
import type { ApiInfo } from "./api/types";
import { roleOf } from "./role";

const info = (role?: ApiInfo["role"]): ApiInfo => ({ version: "1", database: "sqlite", heartbeat_interval_s: 1, worker_ttl_s: 3, role });

describe("roleOf", () => {
  it("takes the manager's word", () => {
    expect(roleOf(info("viewer"))).toBe("viewer");
    expect(roleOf(info("operator"))).toBe("operator");
  });

  it("offers no actions before the manager answered", () => {
    expect(roleOf(null)).toBe("viewer");
  });

  it("treats a manager that does not report roles as operator-only", () => {
    expect(roleOf(info(undefined))).toBe("operator");
  });
});
