from .cli import main

if __name__ == "__main__":    # not when a spawned worker of `check --jobs` re-imports the main module
    main()
