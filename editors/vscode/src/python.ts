// Which Python runs the server: the `drtriton.pythonPath` setting, else the Python extension's
// active interpreter (through its API, when that extension is installed), else `python3`.
import * as os from 'os';
import * as vscode from 'vscode';

export interface Interpreter {
    path: string;
    from: string; // where the choice came from, for the log and error messages
}

// The part of ms-python.python's API we use (its `environments` API); declared here so the
// extension neither depends on nor requires the Python extension.
interface PythonApi {
    environments?: {
        getActiveEnvironmentPath(resource?: vscode.Uri): { path: string };
        resolveEnvironment(env: { path: string }): Promise<{ executable: { uri?: vscode.Uri } } | undefined>;
        onDidChangeActiveEnvironmentPath: vscode.Event<unknown>;
    };
}

const PYTHON_EXTENSION = 'ms-python.python';

export async function resolvePython(log: vscode.LogOutputChannel): Promise<Interpreter> {
    const scope = vscode.workspace.workspaceFolders?.[0];
    const configured = vscode.workspace.getConfiguration('drtriton', scope).get<string>('pythonPath', '').trim();
    if (configured) {
        return { path: expand(configured, scope), from: 'the drtriton.pythonPath setting' };
    }
    const environments = (await pythonApi(log))?.environments;
    if (environments) {
        try {
            const active = environments.getActiveEnvironmentPath(scope?.uri);
            const resolved = await environments.resolveEnvironment(active);
            const path = resolved?.executable.uri?.fsPath ?? active.path;
            if (path) {
                return { path, from: "the Python extension's interpreter" };
            }
        } catch (e) {
            log.warn(`the Python extension did not give an interpreter: ${e}`);
        }
    }
    return { path: 'python3', from: 'the default (python3 on PATH)' };
}

// Calls `onChange` when the Python extension's interpreter changes (and there is one).
export async function onInterpreterChange(log: vscode.LogOutputChannel, onChange: () => void): Promise<vscode.Disposable | undefined> {
    return (await pythonApi(log))?.environments?.onDidChangeActiveEnvironmentPath(onChange);
}

async function pythonApi(log: vscode.LogOutputChannel): Promise<PythonApi | undefined> {
    const extension = vscode.extensions.getExtension<PythonApi>(PYTHON_EXTENSION);
    if (!extension) {
        return undefined;
    }
    try {
        return extension.isActive ? extension.exports : await extension.activate();
    } catch (e) {
        log.warn(`the Python extension did not activate: ${e}`);
        return undefined;
    }
}

function expand(path: string, folder: vscode.WorkspaceFolder | undefined): string {
    if (path === '~' || path.startsWith('~/')) {
        path = os.homedir() + path.slice(1);
    }
    return folder ? path.replace(/\$\{workspaceFolder\}/g, folder.uri.fsPath) : path;
}
