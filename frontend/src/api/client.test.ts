import { describe, expect, it } from "vitest";
import { ApiClient, ApiError, NetworkError, type FetchLike } from "./client";

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
}

describe("ApiClient", () => {
  it("sends the bearer token and follows next_after up to the page bound", async () => {
    const calls: Array<{ url: string; auth: string | null }> = [];
    const fetchImpl: FetchLike = async (url, init) => {
      calls.push({ url, auth: new Headers(init?.headers).get("Authorization") });
      const after = Number(new URL(url, "http://x").searchParams.get("after") ?? 0);
      return json(200, { items: [{ id: after + 1 }], next_after: after + 1 });
    };
    const result = await new ApiClient("tok", fetchImpl).allWorkers({ pageSize: 1, maxPages: 3 });
    expect(result.workers.map((w) => w.id)).toEqual([1, 2, 3]);
    expect(result.truncated).toBe(true);
    expect(calls.map((c) => c.url)).toEqual([
      "/api/workers?limit=1",
      "/api/workers?limit=1&after=1",
      "/api/workers?limit=1&after=2",
    ]);
    expect(calls.every((c) => c.auth === "Bearer tok")).toBe(true);
  });

  it("stops at the last page", async () => {
    const fetchImpl: FetchLike = async () => json(200, { items: [{ id: 1 }], next_after: null });
    const result = await new ApiClient("tok", fetchImpl).allWorkers();
    expect(result).toEqual({ workers: [{ id: 1 }], truncated: false });
  });

  it("turns a 401 into an ApiError carrying the server's detail", async () => {
    const fetchImpl: FetchLike = async () => json(401, { detail: "invalid API token" });
    const err = await new ApiClient("bad", fetchImpl).info().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).unauthorized).toBe(true);
    expect((err as ApiError).detail).toBe("invalid API token");
  });

  it("turns a failed fetch into a NetworkError", async () => {
    const fetchImpl: FetchLike = async () => {
      throw new TypeError("Failed to fetch");
    };
    await expect(new ApiClient("t", fetchImpl).info()).rejects.toBeInstanceOf(NetworkError);
  });
});

describe("ApiClient populations and agents", () => {
  it("posts the editor's YAML as is and exposes the 422 issues with their loc", async () => {
    let sent: { body: unknown; type: string | null; method?: string } | null = null;
    const fetchImpl: FetchLike = async (_url, init) => {
      sent = { body: init?.body, type: new Headers(init?.headers).get("Content-Type"), method: init?.method };
      return json(422, {
        detail: [{ type: "population_config", loc: ["body", "distributions", 0, "categories"], msg: "weights sum to 0.8, not 1" }],
      });
    };
    const err = await new ApiClient("t", fetchImpl).createPopulation("name: x\n").catch((e: unknown) => e);
    expect(sent).toEqual({ body: "name: x\n", type: "application/yaml", method: "POST" });
    expect((err as ApiError).status).toBe(422);
    expect((err as ApiError).issues).toEqual([
      { loc: ["body", "distributions", 0, "categories"], msg: "weights sum to 0.8, not 1", type: "population_config" },
    ]);
    expect((err as ApiError).detail).toBe("weights sum to 0.8, not 1");
  });

  it("builds agent browser queries from the filters it was given", async () => {
    const urls: string[] = [];
    const fetchImpl: FetchLike = async (url) => {
      urls.push(url);
      return json(200, { items: [], next_after: null });
    };
    const client = new ApiClient("t", fetchImpl);
    await client.agentsPage({ population_id: 3, attribute: "education:high school" }, { after: 4294967300, limit: 25 });
    await client.agentsPage({ population_id: 3, worker_id: 2 }, { after: null, limit: 25 });
    expect(urls).toEqual([
      "/api/agents?population_id=3&attribute=education%3Ahigh+school&after=4294967300&limit=25",
      "/api/agents?population_id=3&worker_id=2&limit=25",
    ]);
  });
});

describe("ApiClient simulations", () => {
  it("exports decisions with the token in the header, never in the URL, under the server's file name", async () => {
    const calls: Array<{ url: string; auth: string | null; accept: string | null }> = [];
    const fetchImpl: FetchLike = async (url, init) => {
      const headers = new Headers(init?.headers);
      calls.push({ url, auth: headers.get("Authorization"), accept: headers.get("Accept") });
      return new Response("round,agent_id,value,status,response\n1,5,3.5,valid,\n", {
        status: 200,
        headers: { "Content-Type": "text/csv", "Content-Disposition": 'attachment; filename="simulation-7-decisions.csv"' },
      });
    };
    const client = new ApiClient("secret", fetchImpl);
    const all = await client.exportDecisions(7, "csv");
    expect(all.filename).toBe("simulation-7-decisions.csv");
    expect(await all.blob.text()).toBe("round,agent_id,value,status,response\n1,5,3.5,valid,\n");
    const one = await client.exportDecisions(7, "jsonl", 3);
    expect(one.filename).toBe("simulation-7-decisions-round-3.csv");
    expect(calls.map((c) => c.url)).toEqual(["/api/simulations/7/decisions?format=csv", "/api/simulations/7/decisions?format=jsonl&round=3"]);
    expect(calls.every((c) => c.auth === "Bearer secret" && !c.url.includes("secret"))).toBe(true);
    expect(calls[1]?.accept).toBe("application/x-ndjson");
    await client.exportDecisions(7, "parquet");
    expect(calls[2]?.url).toBe("/api/simulations/7/decisions?format=parquet");
    expect(calls[2]?.accept).toBe("application/vnd.apache.parquet");
  });

  it("turns a 409 on launch into an ApiError with the reason, and 422s into issues", async () => {
    const answers = [
      json(409, { detail: "population 4 is busy: simulation 2 is running" }),
      json(422, { detail: [{ loc: ["body", "rounds"], msg: "Input should be less than or equal to 1000", type: "less_than_equal", ctx: { le: 1000 } }] }),
    ];
    const fetchImpl: FetchLike = async () => answers.shift() as Response;
    const client = new ApiClient("t", fetchImpl);
    const busy = (await client.createSimulation({ population_id: 4 }).catch((e: unknown) => e)) as ApiError;
    expect([busy.status, busy.detail]).toEqual([409, "population 4 is busy: simulation 2 is running"]);
    const invalid = (await client.createSimulation({ rounds: 5000 }).catch((e: unknown) => e)) as ApiError;
    expect(invalid.issues).toEqual([{ loc: ["body", "rounds"], msg: "Input should be less than or equal to 1000", type: "less_than_equal", ctx: { le: 1000 } }]);
  });

  it("pauses, resumes (with no body: the workers hold the API keys) and repairs with POSTs, and says why on 409", async () => {
    const calls: Array<{ url: string; method?: string; body: unknown; type: string | null }> = [];
    const answers = [
      json(200, { id: 5, status: "paused" }),
      json(200, { id: 5, status: "running" }),
      json(409, { detail: "simulation 5 is completed: only a paused or failed one resumes" }),
      json(200, { id: 2, status: "degraded", hosted: 600, size: 1000 }),
    ];
    const fetchImpl: FetchLike = async (url, init) => {
      calls.push({ url, method: init?.method, body: init?.body, type: new Headers(init?.headers).get("Content-Type") });
      return answers.shift() as Response;
    };
    const client = new ApiClient("t", fetchImpl);
    expect((await client.pauseSimulation(5)).status).toBe("paused");
    expect((await client.resumeSimulation(5)).status).toBe("running");
    const refused = (await client.resumeSimulation(5).catch((e: unknown) => e)) as ApiError;
    expect([refused.status, refused.detail]).toEqual([409, "simulation 5 is completed: only a paused or failed one resumes"]);
    expect(await client.repairPopulation(2)).toMatchObject({ status: "degraded", hosted: 600 });
    expect(calls).toEqual([
      { url: "/api/simulations/5/pause", method: "POST", body: undefined, type: null },
      { url: "/api/simulations/5/resume", method: "POST", body: undefined, type: null },
      { url: "/api/simulations/5/resume", method: "POST", body: undefined, type: null },
      { url: "/api/populations/2/repair", method: "POST", body: undefined, type: null },
    ]);
  });

  it("reads an agent's decisions with the opaque cursor as given", async () => {
    const urls: string[] = [];
    const fetchImpl: FetchLike = async (url) => {
      urls.push(url);
      return json(200, { items: [], next_after: null });
    };
    await new ApiClient("t", fetchImpl).agentDecisions(4294967296, { after: "12:3", limit: 20 });
    expect(urls).toEqual(["/api/agents/4294967296/decisions?after=12%3A3&limit=20"]);
  });
});

describe("ApiClient group metrics", () => {
  it("asks a round's page of groups, follows a group's rounds past a page, and exports with the token in the header", async () => {
    const calls: Array<{ url: string; auth: string | null; accept: string | null }> = [];
    const answers: Response[] = [
      json(200, { round: 4, groups: 30, names: ["share_ones"], items: [], next_after: 39 }),
      json(200, { group: 2, label: null, items: [{ round: 1, values: { share_ones: 0.5 } }], next_after: 1 }),
      json(200, { group: 2, label: null, items: [{ round: 2, values: { share_ones: 1 } }], next_after: null }),
      new Response("round,group,share_ones\n1,0,0.5\n", { status: 200, headers: { "Content-Disposition": 'attachment; filename="simulation-7-groups.csv"' } }),
    ];
    const fetchImpl: FetchLike = async (url, init) => {
      const headers = new Headers(init?.headers);
      calls.push({ url, auth: headers.get("Authorization"), accept: headers.get("Accept") });
      return answers.shift() as Response;
    };
    const client = new ApiClient("secret", fetchImpl);
    const page = await client.groupsPage(7, { round: 4, after: 19, limit: 20 });
    expect(page.next_after).toBe(39);
    const series = await client.groupSeries(7, 2);
    expect(series.items.map((r) => r.round)).toEqual([1, 2]);
    const file = await client.exportGroups(7, "csv");
    expect(file.filename).toBe("simulation-7-groups.csv");
    expect(await file.blob.text()).toBe("round,group,share_ones\n1,0,0.5\n");
    expect(calls.map((c) => c.url)).toEqual([
      "/api/simulations/7/groups?round=4&after=19&limit=20",
      "/api/simulations/7/groups/2?limit=1000",
      "/api/simulations/7/groups/2?after=1&limit=1000",
      "/api/simulations/7/groups/export?format=csv",
    ]);
    expect(calls.every((c) => c.auth === "Bearer secret" && !c.url.includes("secret"))).toBe(true);
    expect(calls[3]?.accept).toBe("text/csv");
  });
});
