import { describe, expect, it } from "vitest";
import { matchRoute } from "./router";

describe("matchRoute", () => {
  it.each([
    ["/", { page: "cluster" }],
    ["/cluster", { page: "cluster" }],
    ["/workers/3", { page: "worker", id: 3 }],
    ["/workers/x", { page: "notFound" }],
    ["/populations", { page: "populations" }],
    ["/populations/", { page: "populations" }],
    ["/populations/12", { page: "population", id: 12 }],
    ["/agents/4294967296", { page: "agent", id: 4294967296 }],
    ["/simulations", { page: "simulations" }],
    ["/simulations/new", { page: "simulationNew" }],
    ["/simulations/7", { page: "simulation", id: 7 }],
    ["/simulations/7/", { page: "simulation", id: 7 }],
    ["/populations/abc", { page: "notFound" }],
    ["/nowhere", { page: "notFound" }],
    ["/api/docs", { page: "apiDocs" }],
    ["/api/docs/x", { page: "notFound" }],
  ])("%s", (path, route) => {
    expect(matchRoute(path)).toEqual(route);
  });
});
