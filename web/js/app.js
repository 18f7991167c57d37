// The console: projects, threads, the chat, memory, the model's view and usage, over the API.
// One module a view, plain ES modules with no build step:
//   signin.js         sign-in, the start, the session's end and what it gives back
//   projects.js       the project picker, the open project and the controls its role allows
//   threads.js        the Conversations panel
//   chat.js           the open thread: its messages, the nudge, its actions
//   composer.js       the message box and a turn (turns.js sends it)
//   memory.js         the Memory panel
//   context.js        what the model sees, and the thread's own settings
//   presets.js        presets and the new chat's preset picker
//   project-panel.js  the Project panel: name and members (usage.js shows usage)
//   data.js           export, import and erasing your data
//   views.js          which view and side panel show; dialogs.js, state.js, dom.js,
//                     alerts.js, api.js and session.js are shared by all
import { wireChat } from "./chat.js";
import { wireComposer } from "./composer.js";
import { wireContext } from "./context.js";
import { wireData } from "./data.js";
import { wireDialogs } from "./dialogs.js";
import { wireMemory } from "./memory.js";
import { wirePresets } from "./presets.js";
import { wireProjectPanel } from "./project-panel.js";
import { wireProjects } from "./projects.js";
import { start, wireSignIn } from "./signin.js";
import { wireThreads } from "./threads.js";
import { wireViews } from "./views.js";

wireSignIn();
wireProjects();
wireThreads();
wireChat();
wireComposer();
wireDialogs();
wireMemory();
wireContext();
wireProjectPanel();
wirePresets();
wireData();
wireViews();
start();
