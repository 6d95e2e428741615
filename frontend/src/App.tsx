import { lazy, Suspense, useCallback, useEffect, useMemo, useState } from "react";
import { ApiClient, type ApiError, isUnauthorized } from "./api/client";
import { adoptTokenFromLocation, clearToken, loadToken, saveToken, watchToken } from "./api/token";
import type { ApiInfo } from "./api/types";
import { Header } from "./components/Header";
import { RunNotices } from "./components/RunNotices";
import { RoleContext, roleOf } from "./role";
import { matchRoute, usePath } from "./router";

// Every page is a chunk of its own, loaded when first visited (then cached for good: its name
// carries its hash), so the first page parses React, the shell and itself, not the whole
// dashboard. The sign-in page stays in the main chunk: it is what a new visitor sees first.
// The simulation pages bring the charts (uPlot); the API docs page brings Swagger UI.
// Signed in with a token in the link, the first page never shows these: they load when needed.
const LoginPage = lazy(() => import("./pages/LoginPage").then((m) => ({ default: m.LoginPage })));
const NotFoundPage = lazy(() => import("./pages/NotFoundPage").then((m) => ({ default: m.NotFoundPage })));
const ClusterPage = lazy(() => import("./pages/ClusterPage").then((m) => ({ default: m.ClusterPage })));
const WorkerDetailPage = lazy(() => import("./pages/WorkerDetailPage").then((m) => ({ default: m.WorkerDetailPage })));
const PopulationsPage = lazy(() => import("./pages/PopulationsPage").then((m) => ({ default: m.PopulationsPage })));
const PopulationDetailPage = lazy(() =>
  import("./pages/PopulationDetailPage").then((m) => ({ default: m.PopulationDetailPage })),
);
const AgentDetailPage = lazy(() => import("./pages/AgentDetailPage").then((m) => ({ default: m.AgentDetailPage })));
const SimulationsPage = lazy(() => import("./pages/SimulationsPage").then((m) => ({ default: m.SimulationsPage })));
const SimulationLaunchPage = lazy(() =>
  import("./pages/SimulationLaunchPage").then((m) => ({ default: m.SimulationLaunchPage })),
);
const SimulationDetailPage = lazy(() =>
  import("./pages/SimulationDetailPage").then((m) => ({ default: m.SimulationDetailPage })),
);
const SweepsPage = lazy(() => import("./pages/SweepsPage").then((m) => ({ default: m.SweepsPage })));
const SweepDetailPage = lazy(() => import("./pages/SweepDetailPage").then((m) => ({ default: m.SweepDetailPage })));
const ComparePage = lazy(() => import("./pages/ComparePage").then((m) => ({ default: m.ComparePage })));
const ApiDocsPage = lazy(() => import("./pages/ApiDocsPage").then((m) => ({ default: m.ApiDocsPage })));

export function App() {
  const path = usePath();
  const [token, setToken] = useState<string | null>(() => loadToken());
  const [info, setInfo] = useState<ApiInfo | null>(null);
  const [loginError, setLoginError] = useState<string | null>(null);
  const client = useMemo(() => (token ? new ApiClient(token) : null), [token]);

  const signOut = useCallback((reason: string | null) => {
    clearToken();
    setToken(null);
    setInfo(null);
    setLoginError(reason);
  }, []);

  const handleUnauthorized = useCallback(
    (err: ApiError) => signOut(`Invalid API token: ${err.detail}`),
    [signOut],
  );

  const handleSignedIn = useCallback((newToken: string, newInfo: ApiInfo) => {
    saveToken(newToken);
    setLoginError(null);
    setInfo(newInfo);
    setToken(newToken);
  }, []);

  // Another tab signed in or out (the token is in localStorage): follow it.
  useEffect(
    () =>
      watchToken((next) => {
        setInfo(null);
        setLoginError(null);
        setToken(next);
      }),
    [],
  );

  // main.tsx adopts a #token=... fragment at load; this catches one pasted into an open tab.
  useEffect(() => {
    const onHashChange = () => {
      const adopted = adoptTokenFromLocation();
      if (adopted) {
        setLoginError(null);
        setInfo(null);
        setToken(adopted);
      }
    };
    window.addEventListener("hashchange", onHashChange);
    return () => window.removeEventListener("hashchange", onHashChange);
  }, []);

  // A token from storage or the URL fragment is checked here; a rejected one leads back to login.
  useEffect(() => {
    if (!client || info) return;
    const controller = new AbortController();
    client.info(controller.signal).then(
      (result) => setInfo(result),
      (err: unknown) => {
        if (!controller.signal.aborted && isUnauthorized(err)) handleUnauthorized(err);
      },
    );
    return () => controller.abort();
  }, [client, info, handleUnauthorized]);

  const route = matchRoute(path);
  let page;
  if (!client || !token) {
    page = <LoginPage initialError={loginError} onSignedIn={handleSignedIn} />;
  } else {
    const common = { client, onUnauthorized: handleUnauthorized };
    switch (route.page) {
      case "cluster":
        page = <ClusterPage {...common} token={token} />;
        break;
      case "worker":
        page = <WorkerDetailPage key={route.id} {...common} id={route.id} />;
        break;
      case "populations":
        page = <PopulationsPage {...common} token={token} />;
        break;
      case "population":
        page = <PopulationDetailPage key={route.id} {...common} token={token} id={route.id} />;
        break;
      case "agent":
        page = <AgentDetailPage key={route.id} {...common} id={route.id} />;
        break;
      case "simulations":
        page = <SimulationsPage {...common} token={token} />;
        break;
      case "simulationNew":
        page = <SimulationLaunchPage {...common} />;
        break;
      case "simulation":
        page = <SimulationDetailPage key={route.id} {...common} token={token} id={route.id} />;
        break;
      case "sweeps":
        page = <SweepsPage {...common} token={token} />;
        break;
      case "sweep":
        page = <SweepDetailPage key={route.id} {...common} token={token} id={route.id} />;
        break;
      case "compare":
        page = <ComparePage {...common} />;
        break;
      case "apiDocs":
        page = <ApiDocsPage {...common} token={token} />;
        break;
      case "notFound":
        page = <NotFoundPage />;
        break;
    }
  }

  return (
    <div className="app">
      <Header path={path} signedIn={client !== null} info={info} onSignOut={() => signOut(null)} />
      {/* A viewer token reads everything and changes nothing: pages hide their actions. */}
      <RoleContext.Provider value={roleOf(info)}>
        <Suspense
          fallback={
            <main className="page">
              <p className="empty">Loading…</p>
            </main>
          }
        >
          {page}
        </Suspense>
      </RoleContext.Provider>
      {client && token && <RunNotices client={client} token={token} path={path} onUnauthorized={handleUnauthorized} />}
    </div>
  );
}
