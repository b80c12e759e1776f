// Shared by the Java 5.x programs of tests/java5/: failures recorded instead of thrown, figures
// printed as RESULT lines, and the end every program has.
//
// A program's main calls Outcome.main(() -> run(args)): whatever run throws is a failure too;
// then one "FAIL <what>" line per failure (at most 50), PASS or "FAILED n", and the exit
// status 0 only when nothing failed (halt: the clients' threads must not keep the JVM alive).

import java.util.ArrayList;
import java.util.List;

final class Outcome {
    /** A program's body. */
    interface Body {
        void run() throws Exception;
    }

    private static final List<String> failures = new ArrayList<>();

    private Outcome() {}

    static void main(Body body) {
        try {
            body.run();
        } catch (Throwable error) {
            error.printStackTrace(System.out);
            fail("threw " + error);
        }
        synchronized (failures) {
            for (String failure : failures) {
                System.out.println("FAIL " + failure);
            }
            System.out.println(failures.isEmpty() ? "PASS" : "FAILED " + failures.size());
            System.out.flush();
            Runtime.getRuntime().halt(failures.isEmpty() ? 0 : 1);
        }
    }

    /** Records a broken expectation. */
    static void fail(String what) {
        synchronized (failures) {
            if (failures.size() < 50) {
                failures.add(what);
            }
        }
    }

    /** Prints a figure as "RESULT key=value". */
    static void result(String key, Object value) {
        System.out.println("RESULT " + key + "=" + value);
    }
}
