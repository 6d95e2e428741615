import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { adoptTokenFromLocation } from "./api/token";
import { App } from "./App";
import "./styles.css";

// Before the first render, so the token never lingers in the address bar or history.
adoptTokenFromLocation();

const root = document.getElementById("root");
if (!root) throw new Error("index.html has no #root element");
createRoot(root).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
